//! The guard's word lists: which words a clean-up may drop, which announce a correction,
//! which spoken phrases stand for a sign, and the classes of words that carry meaning.
//!
//! Every list holds lower-case keys as the tokenizer produces them (contractions already
//! spelled out, `’` already `'`). The lists are data: adding a word changes what the guard
//! allows or checks and needs a corpus case in `tests/cleanup_corpus/`.
//!
//! Invariants:
//! - No word is both droppable (a filler or a discourse marker) and a meaning word: a
//!   unit test walks every list against every class.
//! - The opposite pairs are symmetric by construction (a pair lists both sides).

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

/// Sounds with no meaning; a clean-up may drop them anywhere.
pub const FILLERS: &[&str] = &[
    "um", "umm", "uh", "uhh", "uhm", "er", "erm", "ah", "ahh", "hmm", "hm", "mm", "mhm", "eh",
];

/// Words that open a clause without adding to it; a clean-up may drop them at the start of a
/// clause (the text's start, after a sign that ends a clause, or after other droppable words).
pub const DISCOURSE: &[&str] = &[
    "so",
    "well",
    "okay",
    "alright",
    "like",
    "basically",
    "anyway",
    "anyways",
    "oh",
    "now",
];

/// Two-word discourse openers ("you know", "I mean").
pub const DISCOURSE_PAIRS: &[[&str; 2]] = &[["you", "know"], ["i", "mean"]];

/// Correction cues: the words the speaker says between a false start and what replaces it.
/// `strong` cues retract a whole clause ("scratch that"); weak ones a short phrase.
pub struct Cue {
    pub words: &'static [&'static str],
    pub strong: bool,
}

pub const CUES: &[Cue] = &[
    Cue {
        words: &["scratch", "that"],
        strong: true,
    },
    Cue {
        words: &["let", "me", "rephrase"],
        strong: true,
    },
    Cue {
        words: &["correction"],
        strong: true,
    },
    Cue {
        words: &["i", "mean"],
        strong: false,
    },
    Cue {
        words: &["i", "meant"],
        strong: false,
    },
    Cue {
        words: &["make", "that"],
        strong: false,
    },
    Cue {
        words: &["or", "rather"],
        strong: false,
    },
    Cue {
        words: &["sorry"],
        strong: false,
    },
    Cue {
        words: &["no"],
        strong: false,
    },
    Cue {
        words: &["actually"],
        strong: false,
    },
    Cue {
        words: &["wait"],
        strong: false,
    },
];

/// Spoken punctuation: the phrase and the signs any one of which may stand for it.
pub const SPOKEN_SIGNS: &[(&[&str], &[&str])] = &[
    (&["period"], &["."]),
    (&["full", "stop"], &["."]),
    (&["dot"], &["."]),
    (&["comma"], &[","]),
    (&["question", "mark"], &["?"]),
    (&["exclamation", "point"], &["!"]),
    (&["exclamation", "mark"], &["!"]),
    (&["colon"], &[":"]),
    (&["semicolon"], &[";"]),
    (&["semi", "colon"], &[";"]),
    (&["new", "line"], &["\n"]),
    (&["newline"], &["\n"]),
    (&["new", "paragraph"], &["\n"]),
    (&["dash"], &["-", "–", "—"]),
    (&["hyphen"], &["-"]),
    (&["open", "paren"], &["("]),
    (&["open", "parenthesis"], &["("]),
    (&["close", "paren"], &[")"]),
    (&["close", "parenthesis"], &[")"]),
    (&["open", "quote"], &["\"", "“", "'", "‘"]),
    (&["close", "quote"], &["\"", "”", "'", "’"]),
    (&["end", "quote"], &["\"", "”", "'", "’"]),
    (&["unquote"], &["\"", "”", "'", "’"]),
    (&["quote"], &["\"", "“", "”"]),
    (&["ellipsis"], &["…", "..."]),
    (&["slash"], &["/"]),
    (&["at", "sign"], &["@"]),
    (&["ampersand"], &["&"]),
    (&["hashtag"], &["#"]),
];

/// Contractions and informal forms as their full words. Keys are whole tokens.
pub const EXPANSIONS: &[(&str, &[&str])] = &[
    ("won't", &["will", "not"]),
    ("can't", &["can", "not"]),
    ("cannot", &["can", "not"]),
    ("shan't", &["shall", "not"]),
    ("ain't", &["is", "not"]),
    ("let's", &["let", "us"]),
    ("gonna", &["going", "to"]),
    ("wanna", &["want", "to"]),
    ("gotta", &["got", "to"]),
    ("kinda", &["kind", "of"]),
    ("sorta", &["sort", "of"]),
    ("lemme", &["let", "me"]),
    ("gimme", &["give", "me"]),
    ("y'all", &["you", "all"]),
    ("ok", &["okay"]),
    ("o.k", &["okay"]),
    ("all-right", &["alright"]),
    ("mister", &["mr"]),
    ("doctor", &["dr"]),
    ("&", &["and"]),
];

/// Two words a clean-up may write as one (and back): "all right" ↔ "alright".
pub const SAME_AS_ONE: &[([&str; 2], &str)] = &[(["all", "right"], "alright")];

/// Words a rewrite may drop without changing what was said: intensifiers and hedges of
/// speech that written text leaves out.
pub const DROPPABLE_IN_REWRITE: &[&str] = &[
    "really",
    "just",
    "very",
    "actually",
    "basically",
    "literally",
    "honestly",
    "totally",
    "kind",
    "sort",
    "pretty",
    "quite",
    "thing",
    "yet",
    "got",
    "then",
    "also",
    "still",
    "please",
    "thanks",
    "thank",
    "hey",
    "hi",
    "hello",
    "dear",
];

/// Words that only build a sentence (articles, prepositions without direction, auxiliaries);
/// a rewrite may add or drop them freely. Meaning words are *not* here: they are checked
/// class by class.
pub const FUNCTION_WORDS: &[&str] = &[
    "a",
    "an",
    "the",
    "and",
    "or",
    "but",
    "of",
    "in",
    "on",
    "at",
    "by",
    "for",
    "with",
    "as",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "being",
    "am",
    "it",
    "its",
    "itself",
    "this",
    "that",
    "these",
    "those",
    "there",
    "here",
    "do",
    "does",
    "did",
    "done",
    "doing",
    "have",
    "has",
    "had",
    "having",
    "'s",
    "'d",
    "if",
    "whether",
    "than",
    "about",
    "which",
    "who",
    "whom",
    "whose",
    "what",
    "when",
    "where",
    "why",
    "how",
    "because",
    "since",
    "while",
    "though",
    "although",
    "however",
    "therefore",
    "thus",
    "also",
    "too",
    "so",
    "such",
    "get",
    "gets",
    "getting",
    "let",
    "okay",
    "alright",
    "oh",
    "via",
    "per",
    "regarding",
    "whereas",
    "either",
    "going",
];

/// Negation markers. "rather than" and "instead of" negate what follows them too.
pub const NEGATIONS: &[&str] = &[
    "not", "no", "never", "nothing", "none", "nobody", "neither", "nor", "without", "nowhere",
    "noone",
];
pub const NEGATION_PAIRS: &[[&str; 2]] = &[["rather", "than"], ["instead", "of"], ["no", "one"]];

/// Yes and its kin.
pub const YES: &[&str] = &["yes", "yeah", "yep", "yup", "aye", "yea"];

/// Modal verbs by what they say; a rewrite may move within a class ("can you" → "could
/// you", "may" → "might"), never across ("can't" → "might not" is no longer a fact).
pub const MODAL_CLASSES: &[(&str, &[&str])] = &[
    ("necessity", &["must"]),
    ("advice", &["should", "ought"]),
    ("ability", &["can", "could"]),
    ("possibility", &["may", "might"]),
    ("future", &["will", "would", "shall"]),
];
/// Two-word modals ("have to", "need to").
pub const MODAL_PAIRS: &[([&str; 2], &str)] = &[
    (["have", "to"], "necessity"),
    (["has", "to"], "necessity"),
    (["had", "to"], "necessity"),
    (["need", "to"], "necessity"),
    (["needs", "to"], "necessity"),
    (["got", "to"], "necessity"),
];

/// Person: (form, person, role). Roles: subject, object, possessive, reflexive, or `any`
/// where English does not tell ("you", and "me"/"I" beside "and").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Person {
    FirstSingular,
    FirstPlural,
    Second,
    ThirdMasculine,
    ThirdFeminine,
    ThirdPlural,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    Subject,
    Object,
    Possessive,
    Reflexive,
    Any,
}

pub const PRONOUNS: &[(&str, Person, Role)] = &[
    ("i", Person::FirstSingular, Role::Subject),
    ("me", Person::FirstSingular, Role::Object),
    ("my", Person::FirstSingular, Role::Possessive),
    ("mine", Person::FirstSingular, Role::Possessive),
    ("myself", Person::FirstSingular, Role::Reflexive),
    ("we", Person::FirstPlural, Role::Subject),
    ("us", Person::FirstPlural, Role::Object),
    ("our", Person::FirstPlural, Role::Possessive),
    ("ours", Person::FirstPlural, Role::Possessive),
    ("ourselves", Person::FirstPlural, Role::Reflexive),
    ("you", Person::Second, Role::Any),
    ("your", Person::Second, Role::Possessive),
    ("yours", Person::Second, Role::Possessive),
    ("yourself", Person::Second, Role::Reflexive),
    ("yourselves", Person::Second, Role::Reflexive),
    ("he", Person::ThirdMasculine, Role::Subject),
    ("him", Person::ThirdMasculine, Role::Object),
    ("his", Person::ThirdMasculine, Role::Possessive),
    ("himself", Person::ThirdMasculine, Role::Reflexive),
    ("she", Person::ThirdFeminine, Role::Subject),
    ("her", Person::ThirdFeminine, Role::Any),
    ("hers", Person::ThirdFeminine, Role::Possessive),
    ("herself", Person::ThirdFeminine, Role::Reflexive),
    ("they", Person::ThirdPlural, Role::Subject),
    ("them", Person::ThirdPlural, Role::Object),
    ("their", Person::ThirdPlural, Role::Possessive),
    ("theirs", Person::ThirdPlural, Role::Possessive),
    ("themselves", Person::ThirdPlural, Role::Reflexive),
];

/// Quantifiers by class; "a few" and "a little" are read as `some` before these apply.
pub const QUANTIFIER_CLASSES: &[(&str, &[&str])] = &[
    (
        "all",
        &[
            "all",
            "every",
            "each",
            "everything",
            "everyone",
            "everybody",
            "everywhere",
            "always",
            "both",
            "entire",
            "whole",
        ],
    ),
    (
        "some",
        &[
            "some",
            "any",
            "something",
            "someone",
            "somebody",
            "anything",
            "anyone",
            "anybody",
            "sometimes",
            "several",
            "somewhere",
            "anywhere",
        ],
    ),
    ("many", &["many", "lots", "plenty", "often"]),
    ("most", &["most", "mostly", "usually"]),
    (
        "few",
        &["few", "little", "rarely", "seldom", "hardly", "barely"],
    ),
    ("only", &["only"]),
    ("least", &["least"]),
];

/// Directions and order: a clean-up that writes more of one side and less of the other than
/// was spoken reverses what was said. Words are compared by their Snowball English stems, so inflections count ("increased"
/// is "increase"). "to"/"from" is not here: "to" is too common to count, so the guard compares
/// what follows each "from" instead.
pub const DIRECTIONS: &[(&[&str], &[&str])] = &[
    (&["before"], &["after"]),
    (&["earlier", "early"], &["later", "late"]),
    (&["left"], &["right"]),
    (
        &["up", "upward", "upwards"],
        &["down", "downward", "downwards"],
    ),
    (&["above", "over"], &["below", "under", "beneath"]),
    (
        &["inside", "indoors", "indoor"],
        &["outside", "outdoors", "outdoor"],
    ),
    (&["upload"], &["download"]),
    (&["import"], &["export"]),
    (&["push"], &["pull"]),
    (&["north"], &["south"]),
    (&["east"], &["west"]),
    (&["next"], &["previous", "last"]),
    (&["in", "into"], &["out"]),
];

/// Other opposites, compared the same way as [`DIRECTIONS`].
pub const OPPOSITES: &[(&[&str], &[&str])] = &[
    (
        &["increase", "raise"],
        &["decrease", "reduce", "lower", "cut"],
    ),
    (&["open", "unlock"], &["close", "shut", "lock"]),
    (
        &["accept", "approve"],
        &["reject", "decline", "deny", "refuse"],
    ),
    (&["enable", "activate"], &["disable", "deactivate"]),
    (&["buy", "bought", "purchase"], &["sell", "sold"]),
    (&["win", "won"], &["lose", "lost"]),
    (&["include"], &["exclude", "omit"]),
    (
        &["allow", "permit"],
        &["forbid", "forbidden", "prohibit", "block", "ban"],
    ),
    (&["add"], &["remove", "subtract"]),
    (&["lend", "lent"], &["borrow"]),
    (&["give", "gave", "given"], &["take", "took", "taken"]),
    (&["send", "sent"], &["receive"]),
    (&["remember"], &["forget", "forgot", "forgotten"]),
    (&["agree"], &["disagree"]),
    (&["confirm"], &["cancel"]),
    (&["hire"], &["fire"]),
    (
        &["good", "better", "best", "great"],
        &["bad", "worse", "worst", "terrible"],
    ),
    (&["more"], &["less", "fewer"]),
    (&["most"], &["least"]),
    (&["high", "higher", "highest"], &["low", "lower", "lowest"]),
    (&["max", "maximum"], &["min", "minimum"]),
    (&["true"], &["false"]),
    (&["correct"], &["incorrect", "wrong"]),
    (&["success", "succeed", "pass"], &["failure", "fail"]),
    (&["positive"], &["negative"]),
    (&["easy", "easier"], &["hard", "harder", "difficult"]),
    (&["cheap", "cheaper"], &["expensive"]),
    (
        &["fast", "faster", "quick", "quickly"],
        &["slow", "slower", "slowly"],
    ),
    (&["hot", "warm"], &["cold", "cool"]),
    (&["light", "bright"], &["dark"]),
    (&["full"], &["empty"]),
    (&["same"], &["different"]),
    (&["possible"], &["impossible"]),
    (&["legal"], &["illegal"]),
    (&["likely"], &["unlikely"]),
    (&["available"], &["unavailable"]),
    (&["off"], &["on"]),
    (&["online"], &["offline"]),
    (&["mute"], &["unmute"]),
    (&["like", "love"], &["dislike", "hate"]),
    (&["strong"], &["weak"]),
    (&["big", "bigger", "large", "larger"], &["small", "smaller"]),
    (&["long", "longer"], &["short", "shorter"]),
    (&["new", "newer"], &["old", "older"]),
    (&["heavy"], &["light"]),
    (&["wide"], &["narrow"]),
    (&["top"], &["bottom"]),
    (&["front", "forward"], &["back", "backward"]),
    (&["appear"], &["disappear"]),
    (&["visible"], &["invisible"]),
    (&["connect"], &["disconnect"]),
    (&["encrypt"], &["decrypt"]),
    (&["install"], &["uninstall"]),
    (&["subscribe"], &["unsubscribe"]),
    (
        &["save", "keep", "kept", "create"],
        &["delete", "discard", "destroy"],
    ),
    (&["profit", "gain"], &["loss"]),
    (&["credit"], &["debit"]),
    (&["deposit"], &["withdraw"]),
    (&["income"], &["expense"]),
    (&["arrive"], &["leave", "depart"]),
    (
        &["start", "begin", "began", "begun"],
        &["stop", "end", "finish"],
    ),
    // Connectives and tense: function words a rewrite moves freely, but never across.
    (
        &["because", "therefore", "hence"],
        &["although", "though", "despite", "however", "but"],
    ),
    (&["if", "whether"], &["when", "whenever"]),
    (&["or", "either"], &["and", "both"]),
    (&["was", "were"], &["is", "are", "am"]),
];

/// Weekdays and their short forms, by day.
pub const WEEKDAYS: &[(&str, &[&str])] = &[
    ("monday", &["monday", "mon"]),
    ("tuesday", &["tuesday", "tue", "tues"]),
    ("wednesday", &["wednesday", "wed"]),
    ("thursday", &["thursday", "thu", "thur", "thurs"]),
    ("friday", &["friday", "fri"]),
    ("saturday", &["saturday", "sat"]),
    ("sunday", &["sunday", "sun"]),
];

/// Months and their short forms ("may" is a month only when written "May" mid-sentence).
pub const MONTHS: &[(&str, &[&str])] = &[
    ("january", &["january", "jan"]),
    ("february", &["february", "feb"]),
    ("march", &["march", "mar"]),
    ("april", &["april", "apr"]),
    ("may", &["may"]),
    ("june", &["june", "jun"]),
    ("july", &["july", "jul"]),
    ("august", &["august", "aug"]),
    ("september", &["september", "sep", "sept"]),
    ("october", &["october", "oct"]),
    ("november", &["november", "nov"]),
    ("december", &["december", "dec"]),
];

/// Days named relative to today.
pub const RELATIVE_DAYS: &[&str] = &["today", "tonight", "tomorrow", "yesterday"];

/// Units a number may carry, by canonical name.
pub const UNITS: &[(&str, &[&str])] = &[
    ("dollar", &["dollar", "dollars", "usd", "buck", "bucks"]),
    ("euro", &["euro", "euros", "eur"]),
    ("pound", &["pound", "pounds", "gbp", "quid"]),
    ("yen", &["yen", "jpy"]),
    ("cent", &["cent", "cents"]),
    ("percent", &["percent", "per-cent", "pct"]),
    (
        "kilometre",
        &[
            "kilometre",
            "kilometres",
            "kilometer",
            "kilometers",
            "km",
            "kms",
        ],
    ),
    ("mile", &["mile", "miles", "mi"]),
    ("metre", &["metre", "metres", "meter", "meters"]),
    (
        "centimetre",
        &[
            "centimetre",
            "centimetres",
            "centimeter",
            "centimeters",
            "cm",
        ],
    ),
    (
        "millimetre",
        &[
            "millimetre",
            "millimetres",
            "millimeter",
            "millimeters",
            "mm",
        ],
    ),
    ("foot", &["foot", "feet", "ft"]),
    ("inch", &["inch", "inches", "in."]),
    (
        "kilogram",
        &["kilogram", "kilograms", "kilo", "kilos", "kg", "kgs"],
    ),
    ("gram", &["gram", "grams", "g"]),
    ("milligram", &["milligram", "milligrams", "mg"]),
    ("microgram", &["microgram", "micrograms", "mcg", "µg"]),
    ("pound-weight", &["lb", "lbs"]),
    ("litre", &["litre", "litres", "liter", "liters", "l"]),
    (
        "millilitre",
        &[
            "millilitre",
            "millilitres",
            "milliliter",
            "milliliters",
            "ml",
        ],
    ),
    ("gallon", &["gallon", "gallons"]),
    ("second", &["seconds", "sec", "secs"]),
    ("minute", &["minute", "minutes", "min", "mins"]),
    ("hour", &["hour", "hours", "hr", "hrs", "h"]),
    ("day", &["day", "days"]),
    ("week", &["week", "weeks"]),
    ("month", &["month", "months"]),
    ("year", &["year", "years", "yr", "yrs"]),
    ("degree", &["degree", "degrees", "°"]),
    ("am", &["am"]),
    ("pm", &["pm"]),
    ("times", &["times", "x"]),
    ("gigabyte", &["gigabyte", "gigabytes", "gb"]),
    ("megabyte", &["megabyte", "megabytes", "mb"]),
    ("terabyte", &["terabyte", "terabytes", "tb"]),
];

/// Currency signs and the unit each stands for.
pub const CURRENCY_SIGNS: &[(char, &str)] =
    &[('$', "dollar"), ('€', "euro"), ('£', "pound"), ('¥', "yen")];

/// Lines an email or message may add around the words: a greeting's first word and a
/// closing's words.
pub const GREETINGS: &[&str] = &[
    "hi",
    "hello",
    "hey",
    "dear",
    "good",
    "morning",
    "afternoon",
    "evening",
];
pub const CLOSINGS: &[&str] = &[
    "thanks",
    "thank",
    "you",
    "best",
    "regards",
    "kind",
    "warm",
    "cheers",
    "sincerely",
    "many",
    "all",
    "the",
    "yours",
    "truly",
    "wishes",
];
/// Who a greeting may address without naming anyone.
pub const GREETED_GROUPS: &[&str] = &["team", "all", "everyone", "everybody", "folks", "there"];

/// Auxiliaries that open a question when followed by a subject ("is the", "can you").
pub const QUESTION_AUX: &[&str] = &[
    "is", "are", "was", "were", "am", "do", "does", "did", "can", "could", "will", "would",
    "should", "shall", "may", "might", "must", "have", "has", "had",
];
pub const QUESTION_WORDS: &[&str] = &[
    "what", "who", "whom", "whose", "when", "where", "why", "how", "which",
];
/// Words that can follow a question's auxiliary as its subject.
pub const SUBJECT_STARTS: &[&str] = &[
    "i",
    "you",
    "he",
    "she",
    "it",
    "we",
    "they",
    "there",
    "this",
    "that",
    "these",
    "those",
    "the",
    "a",
    "an",
    "my",
    "your",
    "our",
    "their",
    "his",
    "her",
    "its",
    "anyone",
    "anybody",
    "someone",
    "somebody",
    "everyone",
    "everybody",
];

/// The lists as hash tables, built once: the guard asks about every token many times.
struct Index {
    sets: HashMap<usize, HashSet<&'static str>>,
    weekday: HashMap<&'static str, &'static str>,
    month: HashMap<&'static str, &'static str>,
    unit: HashMap<&'static str, &'static str>,
    modal: HashMap<&'static str, &'static str>,
    quantifier: HashMap<&'static str, &'static str>,
    pronoun: HashMap<&'static str, (Person, Role)>,
}

fn index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| {
        let lists: [&'static [&'static str]; 13] = [
            FILLERS,
            DISCOURSE,
            DROPPABLE_IN_REWRITE,
            FUNCTION_WORDS,
            NEGATIONS,
            YES,
            RELATIVE_DAYS,
            GREETINGS,
            CLOSINGS,
            GREETED_GROUPS,
            QUESTION_AUX,
            QUESTION_WORDS,
            SUBJECT_STARTS,
        ];
        let by_form = |table: &[(&'static str, &'static [&'static str])]| {
            let mut m = HashMap::new();
            for (name, forms) in table {
                for f in *forms {
                    m.entry(*f).or_insert(*name);
                }
            }
            m
        };
        Index {
            sets: lists
                .iter()
                .map(|l| (l.as_ptr() as usize, l.iter().copied().collect()))
                .collect(),
            weekday: by_form(WEEKDAYS),
            month: by_form(MONTHS),
            unit: by_form(UNITS),
            modal: by_form(MODAL_CLASSES),
            quantifier: by_form(QUANTIFIER_CLASSES),
            pronoun: PRONOUNS.iter().map(|(f, p, r)| (*f, (*p, *r))).collect(),
        }
    })
}

/// Whether `key` is in `list` (one of this module's lists).
pub fn is_in(list: &'static [&'static str], key: &str) -> bool {
    match index().sets.get(&(list.as_ptr() as usize)) {
        Some(set) => set.contains(key),
        None => list.contains(&key),
    }
}

/// The weekday a key names, if any.
pub fn weekday(key: &str) -> Option<&'static str> {
    index().weekday.get(key).copied()
}

/// The month a key names, if any ("may" included: callers decide by case).
pub fn month(key: &str) -> Option<&'static str> {
    index().month.get(key).copied()
}

/// The unit a key names, if any.
pub fn unit(key: &str) -> Option<&'static str> {
    index().unit.get(key).copied()
}

pub fn modal_class(key: &str) -> Option<&'static str> {
    index().modal.get(key).copied()
}

pub fn quantifier_class(key: &str) -> Option<&'static str> {
    index().quantifier.get(key).copied()
}

pub fn pronoun(key: &str) -> Option<(Person, Role)> {
    index().pronoun.get(key).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A droppable word is never a meaning word: otherwise the guard would let a clean-up
    /// drop a "not" or a "must" as a filler.
    #[test]
    fn droppable_words_carry_no_meaning() {
        let droppable = FILLERS.iter().chain(DISCOURSE.iter());
        for w in droppable {
            assert!(!NEGATIONS.contains(w), "{w}");
            assert!(!YES.contains(w), "{w}");
            assert!(modal_class(w).is_none(), "{w}");
            assert!(pronoun(w).is_none(), "{w}");
            assert!(quantifier_class(w).is_none(), "{w}");
            assert!(weekday(w).is_none() && month(w).is_none(), "{w}");
        }
        for w in DROPPABLE_IN_REWRITE.iter().chain(FUNCTION_WORDS.iter()) {
            assert!(!NEGATIONS.contains(w), "{w}");
            assert!(!YES.contains(w), "{w}");
            assert!(modal_class(w).is_none(), "{w}");
            assert!(pronoun(w).is_none(), "{w}");
            assert!(quantifier_class(w).is_none(), "{w}");
        }
    }

    #[test]
    fn lookups_find_their_class() {
        assert_eq!(weekday("tues"), Some("tuesday"));
        assert_eq!(month("sept"), Some("september"));
        assert_eq!(unit("kilometres"), Some("kilometre"));
        assert_eq!(modal_class("could"), Some("ability"));
        assert_eq!(modal_class("might"), Some("possibility"));
        assert_eq!(quantifier_class("everyone"), Some("all"));
        assert_eq!(pronoun("me"), Some((Person::FirstSingular, Role::Object)));
    }
}
