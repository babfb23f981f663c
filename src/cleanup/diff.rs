//! A word diff between the spoken words and a clean-up, for history ("What changed").
//!
//! Invariants:
//! - Tokens are the texts' whitespace-separated words, kept as written; two tokens match
//!   when they are equal once lower-cased and stripped of surrounding punctuation ("Friday."
//!   matches "friday"), and a match shows the clean-up's token.
//! - The spoken tokens are exactly the `Same` and `Removed` ones in order; the clean-up's are
//!   exactly the `Same` and `Added` ones in order (so nothing is hidden either way).
//! - Quadratic in words: callers diff only texts up to [`MAX_WORDS`] words each.

/// The longest text (in words) worth a diff on screen.
pub const MAX_WORDS: usize = 2000;

/// One run of the diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Same(String),
    Removed(String),
    Added(String),
}

/// The word diff from `spoken` to `cleaned`, runs of the same kind merged; `None` when either
/// text has more than [`MAX_WORDS`] words.
pub fn word_diff(spoken: &str, cleaned: &str) -> Option<Vec<Change>> {
    let a: Vec<&str> = spoken.split_whitespace().collect();
    let b: Vec<&str> = cleaned.split_whitespace().collect();
    if a.len() > MAX_WORDS || b.len() > MAX_WORDS {
        return None;
    }
    let ka: Vec<String> = a.iter().map(|w| key(w)).collect();
    let kb: Vec<String> = b.iter().map(|w| key(w)).collect();
    // LCS table, (n+1) × (m+1), filled from the end.
    let (n, m) = (a.len(), b.len());
    let mut t = vec![0u32; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            t[at(i, j)] = if ka[i] == kb[j] {
                t[at(i + 1, j + 1)] + 1
            } else {
                t[at(i + 1, j)].max(t[at(i, j + 1)])
            };
        }
    }
    let mut out: Vec<Change> = Vec::new();
    let push = |out: &mut Vec<Change>, c: Change| match (out.last_mut(), &c) {
        (Some(Change::Same(s)), Change::Same(w))
        | (Some(Change::Removed(s)), Change::Removed(w))
        | (Some(Change::Added(s)), Change::Added(w)) => {
            s.push(' ');
            s.push_str(w);
        }
        _ => out.push(c),
    };
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && ka[i] == kb[j] {
            push(&mut out, Change::Same(b[j].to_owned()));
            i += 1;
            j += 1;
        } else if i < n && (j == m || t[at(i + 1, j)] >= t[at(i, j + 1)]) {
            push(&mut out, Change::Removed(a[i].to_owned()));
            i += 1;
        } else {
            push(&mut out, Change::Added(b[j].to_owned()));
            j += 1;
        }
    }
    Some(out)
}

fn key(word: &str) -> String {
    word.trim_matches(|c: char| !c.is_alphanumeric())
        .to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fillers_out_and_punctuation_in() {
        let d = word_diff(
            "so um I think we should move it to friday",
            "I think we should move it to Friday.",
        )
        .expect("diff");
        assert_eq!(
            d,
            [
                Change::Removed("so um".into()),
                Change::Same("I think we should move it to Friday.".into()),
            ]
        );
    }

    #[test]
    fn a_changed_word_is_removed_then_added() {
        let d = word_diff("we need 25 chairs", "we need 52 chairs").expect("diff");
        assert_eq!(
            d,
            [
                Change::Same("we need".into()),
                Change::Removed("25".into()),
                Change::Added("52".into()),
                Change::Same("chairs".into()),
            ]
        );
    }

    #[test]
    fn long_texts_are_not_diffed() {
        let long = "word ".repeat(MAX_WORDS + 1);
        assert!(word_diff(&long, "word").is_none());
    }

    fn side(d: &[Change], spoken: bool) -> Vec<String> {
        d.iter()
            .filter_map(|c| match c {
                Change::Same(s) => Some(s.clone()),
                Change::Removed(s) if spoken => Some(s.clone()),
                Change::Added(s) if !spoken => Some(s.clone()),
                _ => None,
            })
            .flat_map(|s| s.split(' ').map(str::to_owned).collect::<Vec<_>>())
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Both texts can be read back from the diff, word by word (matched words compared
        /// by their key: the diff shows the clean-up's spelling).
        #[test]
        fn both_sides_are_in_the_diff(
            a in proptest::collection::vec("[a-cA-C]{1,2}[.,]?", 0..25),
            b in proptest::collection::vec("[a-cA-C]{1,2}[.,]?", 0..25),
        ) {
            let (sa, sb) = (a.join(" "), b.join(" "));
            let d = word_diff(&sa, &sb).expect("short");
            prop_assert_eq!(side(&d, false), b.clone());
            let keys = |v: &[String]| v.iter().map(|w| key(w)).collect::<Vec<_>>();
            prop_assert_eq!(keys(&side(&d, true)), keys(&a));
        }
    }
}
