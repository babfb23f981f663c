//! Tidy's rule: the clean-up is the spoken words with *listed* edits only. An alignment of
//! the two token lists finds the cheapest way from the spoken words to the clean-up where
//! every listed edit costs nothing and every other edit (a word added, dropped, changed or
//! moved) costs one; the clean-up passes when that cost is zero.
//!
//! The listed edits:
//! - a filler dropped anywhere ("um", "uh");
//! - a discourse marker dropped at the start of a clause ("so", "well", "okay", "you know");
//! - an immediate repetition dropped ("I I think", "can you can you") — never of "not";
//! - a false start dropped where a correction cue follows it, and only the words it
//!   corrects: "by Friday, no, by Thursday" → "by Thursday". A weak cue ("no", "sorry",
//!   "actually", "I mean", "make that", …) takes back at most four words that the
//!   correction restates (same first word, or the same kinds of words in the same places);
//!   a strong cue ("scratch that") takes back its clause;
//! - spoken punctuation dropped where its sign stands ("comma" → `,`);
//! - an "and" dropped where the clean-up ends a sentence instead;
//! - the same words written otherwise, which the tokens already make equal: case,
//!   punctuation, contractions, numbers as digits, units and currency signs; and two words
//!   written as one or one as two ("every one" ↔ "everyone").
//!
//! Invariants:
//! - No tolerance: one unlisted edit refuses.
//! - Memory is one `u16` per pair of token positions (the caller bounds the lengths); time
//!   is that times a small constant.

use std::collections::HashMap;
use std::ops::Range;

use super::lexicon;
use super::tokens::{Kind, Text, Token};

/// A listed edit, or one that is not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EditKind {
    Filler,
    Discourse,
    Repetition,
    FalseStart,
    SpokenPunctuation,
    Joined,
    /// An "and" dropped where the clean-up ends a sentence ("… next week. I will …").
    Conjunction,
    /// Not listed: a spoken word left out.
    Dropped,
    /// Not listed: a word the speaker did not say.
    Added,
    /// Not listed: a spoken word written as another.
    Changed,
}

impl EditKind {
    pub fn listed(self) -> bool {
        !matches!(
            self,
            EditKind::Dropped | EditKind::Added | EditKind::Changed
        )
    }
}

/// One edit on the cheapest path: token ranges in the spoken words and in the clean-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub kind: EditKind,
    pub spoken: Range<usize>,
    pub output: Range<usize>,
}

/// What can be dropped at each spoken position, worked out from the spoken words alone.
pub struct Drops {
    /// Ends of a listed drop starting here, with its kind.
    pub at: Vec<Vec<(usize, EditKind)>>,
    /// Spoken punctuation starting here: (its end, the signs that may stand for it).
    pub signs: Vec<Option<(usize, &'static [&'static str])>>,
}

impl Drops {
    pub fn of(s: &Text) -> Drops {
        let t = &s.tokens;
        let n = t.len();
        let mut at: Vec<Vec<(usize, EditKind)>> = vec![Vec::new(); n];
        let mut signs = vec![None; n];
        let filler: Vec<bool> = t
            .iter()
            .map(|x| matches!(x.kind, Kind::Word) && lexicon::is_in(lexicon::FILLERS, &x.key))
            .collect();
        // Discourse markers at the head of a clause (after other droppable words too).
        let mut lead = vec![false; n + 1];
        let mut i = 0;
        while i < n {
            let head = t[i].clause_start || (i > 0 && lead[i]);
            if filler[i] {
                at[i].push((i + 1, EditKind::Filler));
                lead[i + 1] = head || lead[i + 1];
                i += 1;
                continue;
            }
            let pair = lexicon::DISCOURSE_PAIRS
                .iter()
                .find(|p| t[i].key == p[0] && t.get(i + 1).is_some_and(|x| x.key == p[1]));
            let len = if pair.is_some() {
                2
            } else if matches!(t[i].kind, Kind::Word)
                && lexicon::is_in(lexicon::DISCOURSE, &t[i].key)
            {
                1
            } else {
                0
            };
            // "at like two am", "I was like really surprised": a hedge before a number or
            // an intensifier.
            let hedge = t.get(i + 1).is_some_and(|x| {
                x.num().is_some() || lexicon::is_in(lexicon::DROPPABLE_IN_REWRITE, &x.key)
            });
            if len == 1 && t[i].key == "like" && hedge {
                at[i].push((i + 1, EditKind::Discourse));
                i += 1;
                continue;
            }
            if head && len > 0 {
                at[i].push((i + len, EditKind::Discourse));
                if i + len <= n {
                    lead[i + len] = true;
                }
                i += len;
                continue;
            }
            i += 1;
        }
        // Immediate repetitions, fillers between the copies skipped.
        let content: Vec<usize> = (0..n).filter(|&k| !filler[k]).collect();
        for (ci, &start) in content.iter().enumerate() {
            for k in 1..=6usize {
                if ci + 2 * k > content.len() {
                    break;
                }
                let first = &content[ci..ci + k];
                let second = &content[ci + k..ci + 2 * k];
                let same = first
                    .iter()
                    .zip(second)
                    .all(|(&a, &b)| t[a].matches(&t[b]) && !t[a].is_word("not"));
                if same {
                    at[start].push((second[0], EditKind::Repetition));
                }
            }
        }
        // False starts before a correction cue.
        for c in 0..n {
            for cue in lexicon::CUES {
                let len = cue.words.len();
                if c + len > n
                    || !cue
                        .words
                        .iter()
                        .enumerate()
                        .all(|(k, w)| t[c + k].is_word(w))
                {
                    continue;
                }
                // The correction starts after the cue (fillers after it aside).
                let Some(y) = (c + len..n).find(|&k| !filler[k]) else {
                    continue;
                };
                let max_x = if cue.strong { 40 } else { 4 };
                for x in c.saturating_sub(max_x)..c {
                    // The taken-back words stay inside one sentence (the cue may open the
                    // next one: "…to Anna. Sorry, to Hannah.").
                    if (x + 1..c).any(|k| t[k].sentence_start) {
                        continue;
                    }
                    let xs: Vec<usize> = (x..c).filter(|&k| !filler[k]).collect();
                    if xs.is_empty() {
                        continue;
                    }
                    let ok = if cue.strong {
                        t[x].clause_start
                    } else {
                        restates(t, &xs, y)
                    };
                    if ok {
                        at[x].push((c + len, EditKind::FalseStart));
                    }
                }
            }
        }
        // Spoken punctuation.
        for (i, slot) in signs.iter_mut().enumerate() {
            for (phrase, sign) in lexicon::SPOKEN_SIGNS {
                if i + phrase.len() <= n
                    && phrase.iter().enumerate().all(|(k, w)| t[i + k].is_word(w))
                {
                    *slot = Some((i + phrase.len(), *sign));
                    break;
                }
            }
        }
        Drops { at, signs }
    }
}

/// Whether the words at `xs` are restated by the words from `y` on: the same first word
/// ("by Friday, no, by Thursday"), or as many words of the same kinds where they differ
/// ("Tuesday, I mean Wednesday"; "two coffees, make that three coffees"). A lone word is
/// restated only by one of its kind: "is not, actually, signed" takes nothing back.
fn restates(t: &[Token], xs: &[usize], y: usize) -> bool {
    let first = &t[xs[0]];
    if t.get(y).is_some_and(|w| w.matches(first)) {
        return true;
    }
    if xs.len() > 3 || y + xs.len() > t.len() {
        return false;
    }
    xs.iter()
        .enumerate()
        .all(|(k, &a)| t[a].matches(&t[y + k]) || same_kind(&t[a], &t[y + k]))
}

fn same_kind(a: &Token, b: &Token) -> bool {
    match (&a.kind, &b.kind) {
        (Kind::Num(_), Kind::Num(_)) => true,
        (Kind::Word, Kind::Word) => {
            (lexicon::weekday(&a.key).is_some() && lexicon::weekday(&b.key).is_some())
                || (lexicon::month(&a.key).is_some() && lexicon::month(&b.key).is_some())
                || (a.cap && b.cap)
        }
        _ => false,
    }
}

/// The result of aligning a clean-up with the spoken words.
pub struct Alignment {
    /// Unlisted edits on the cheapest path (0: the clean-up passes Tidy).
    pub cost: usize,
    pub edits: Vec<Edit>,
}

/// What the alignment asks about a pair of positions, worked out once: tokens as interned
/// ids (numbers compared in full, they are few), the joins that exist, the "and"s and the
/// output's sentence breaks.
struct Grid<'t> {
    s: &'t Text<'t>,
    o: &'t Text<'t>,
    /// Interned key per token (`NUM` for a number), and up to two alternative keys.
    sk: Vec<(u32, [u32; 2])>,
    ok: Vec<(u32, [u32; 2])>,
    /// Per spoken position, the joins starting there: (output position, spoken taken, output
    /// taken).
    joins: Vec<Vec<(usize, usize, usize)>>,
    and: Vec<bool>,
    /// The output ends a sentence before its token `j`.
    breaks: Vec<bool>,
}

const NUM: u32 = u32::MAX;
const NONE: u32 = u32::MAX - 1;

impl<'t> Grid<'t> {
    fn new(s: &'t Text<'t>, o: &'t Text<'t>) -> Grid<'t> {
        let mut ids: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
        let mut intern = |k: &'t str| -> u32 {
            let next = ids.len() as u32;
            *ids.entry(k).or_insert(next)
        };
        let mut keys = |t: &'t Text<'t>| -> Vec<(u32, [u32; 2])> {
            t.tokens
                .iter()
                .map(|x| {
                    if x.num().is_some() {
                        return (NUM, [NONE; 2]);
                    }
                    let mut alts = [NONE; 2];
                    for (slot, a) in alts.iter_mut().zip(x.alts) {
                        *slot = intern(a);
                    }
                    (intern(&x.key), alts)
                })
                .collect()
        };
        let sk = keys(s);
        let ok = keys(o);
        let joins = joins_of(s, o);
        let and = s.tokens.iter().map(|t| t.is_word("and")).collect();
        let breaks = (0..=o.len())
            .map(|j| j > 0 && o.gap(j).contains(['.', '!', '?', ';', '\n']))
            .collect();
        Grid {
            s,
            o,
            sk,
            ok,
            joins,
            and,
            breaks,
        }
    }

    fn same(&self, i: usize, j: usize) -> bool {
        let (a, aa) = self.sk[i];
        let (b, ba) = self.ok[j];
        if a == NUM || b == NUM {
            return a == b && self.s.tokens[i].matches(&self.o.tokens[j]);
        }
        a == b || aa.contains(&b) || ba.contains(&a)
    }

    fn joins(&self, i: usize, j: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.joins
            .get(i)
            .into_iter()
            .flatten()
            .filter(move |(at, _, _)| *at == j)
            .map(|(_, di, dj)| (*di, *dj))
    }

    /// A spoken "and" at `i` where the clean-up ends a sentence before its token `j`.
    fn break_and(&self, i: usize, j: usize) -> bool {
        self.and[i] && self.breaks[j]
    }
}

/// The listed edits that turn `s` into `o`, when there is such a path: a search over the
/// free steps only (a match, a join, a listed drop), which stays near the diagonal and so
/// costs about the texts' length, not their product.
pub fn free_path(s: &Text, o: &Text) -> Option<Vec<Edit>> {
    free_search(s, o, &Drops::of(s), &Grid::new(s, o))
}

/// A position in both texts: (spoken tokens taken, output tokens taken).
type State = (usize, usize);

fn free_search(s: &Text, o: &Text, drops: &Drops, grid: &Grid) -> Option<Vec<Edit>> {
    let (n, m) = (s.len(), o.len());
    let w = m + 1;
    let mut seen = vec![false; (n + 1) * w];
    // How each reached state was reached: (previous state, the edit, if any).
    let mut came: HashMap<State, (State, Option<Edit>)> = HashMap::new();
    let mut stack = vec![(0usize, 0usize)];
    seen[0] = true;
    while let Some((i, j)) = stack.pop() {
        if (i, j) == (n, m) {
            let mut edits = Vec::new();
            let mut at = (n, m);
            while at != (0, 0) {
                let (prev, edit) = came.remove(&at)?;
                edits.extend(edit);
                at = prev;
            }
            edits.reverse();
            return Some(edits);
        }
        // Steps pushed last are taken first: a match before a drop.
        let mut next: Vec<(State, Option<Edit>)> = Vec::new();
        if i < n {
            for &(end, kind) in &drops.at[i] {
                next.push((
                    (end, j),
                    Some(Edit {
                        kind,
                        spoken: i..end,
                        output: j..j,
                    }),
                ));
            }
            if let Some((end, signs)) = drops.signs[i]
                && signs.iter().any(|sg| o.gap(j).contains(sg))
            {
                let kind = EditKind::SpokenPunctuation;
                next.push((
                    (end, j),
                    Some(Edit {
                        kind,
                        spoken: i..end,
                        output: j..j,
                    }),
                ));
            }
            if grid.break_and(i, j) {
                let kind = EditKind::Conjunction;
                next.push((
                    (i + 1, j),
                    Some(Edit {
                        kind,
                        spoken: i..i + 1,
                        output: j..j,
                    }),
                ));
            }
        }
        if i < n && j < m {
            for (di, dj) in grid.joins(i, j) {
                let kind = EditKind::Joined;
                let edit = Edit {
                    kind,
                    spoken: i..i + di,
                    output: j..j + dj,
                };
                next.push(((i + di, j + dj), Some(edit)));
            }
            if grid.same(i, j) {
                next.push(((i + 1, j + 1), None));
            }
        }
        for (state, edit) in next {
            let k = state.0 * w + state.1;
            if !seen[k] {
                seen[k] = true;
                came.insert(state, ((i, j), edit));
                stack.push(state);
            }
        }
    }
    None
}

/// Aligns `o` (the clean-up) with `s` (the spoken words): the free path when there is one,
/// else the cheapest path over every edit.
pub fn align(s: &Text, o: &Text) -> Alignment {
    let drops = Drops::of(s);
    let grid = Grid::new(s, o);
    if let Some(edits) = free_search(s, o, &drops, &grid) {
        return Alignment { cost: 0, edits };
    }
    let (n, m) = (s.len(), o.len());
    let w = m + 1;
    let mut cost = vec![u16::MAX; (n + 1) * w];
    let idx = |i: usize, j: usize| i * w + j;
    let signs_at = |j: usize| o.gap(j);
    for i in (0..=n).rev() {
        for j in (0..=m).rev() {
            if i == n && j == m {
                cost[idx(i, j)] = 0;
                continue;
            }
            let mut best = u16::MAX;
            let mut take = |c: u16| best = best.min(c);
            if i < n && j < m && grid.same(i, j) {
                take(cost[idx(i + 1, j + 1)]);
            }
            if i < n && j < m {
                for (di, dj) in grid.joins(i, j) {
                    take(cost[idx(i + di, j + dj)]);
                }
            }
            if i < n {
                for &(end, _) in &drops.at[i] {
                    take(cost[idx(end, j)]);
                }
                if let Some((end, signs)) = drops.signs[i]
                    && signs.iter().any(|sg| signs_at(j).contains(sg))
                {
                    take(cost[idx(end, j)]);
                }
                if grid.break_and(i, j) {
                    take(cost[idx(i + 1, j)]);
                }
                take(cost[idx(i + 1, j)].saturating_add(1));
            }
            if j < m {
                take(cost[idx(i, j + 1)].saturating_add(1));
            }
            if i < n && j < m {
                take(cost[idx(i + 1, j + 1)].saturating_add(1));
            }
            cost[idx(i, j)] = best;
        }
    }
    // Walk the cheapest path from the start, listed edits first.
    let mut edits = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        let here = cost[idx(i, j)];
        if i < n && j < m && grid.same(i, j) && cost[idx(i + 1, j + 1)] == here {
            i += 1;
            j += 1;
            continue;
        }
        let join = if i < n && j < m {
            grid.joins(i, j)
                .find(|(di, dj)| cost[idx(i + di, j + dj)] == here)
        } else {
            None
        };
        if let Some((di, dj)) = join {
            edits.push(Edit {
                kind: EditKind::Joined,
                spoken: i..i + di,
                output: j..j + dj,
            });
            i += di;
            j += dj;
            continue;
        }
        if i < n {
            if let Some(&(end, kind)) = drops.at[i]
                .iter()
                .find(|(end, _)| cost[idx(*end, j)] == here)
            {
                edits.push(Edit {
                    kind,
                    spoken: i..end,
                    output: j..j,
                });
                i = end;
                continue;
            }
            if let Some((end, signs)) = drops.signs[i]
                && signs.iter().any(|sg| signs_at(j).contains(sg))
                && cost[idx(end, j)] == here
            {
                edits.push(Edit {
                    kind: EditKind::SpokenPunctuation,
                    spoken: i..end,
                    output: j..j,
                });
                i = end;
                continue;
            }
            if grid.break_and(i, j) && cost[idx(i + 1, j)] == here {
                edits.push(Edit {
                    kind: EditKind::Conjunction,
                    spoken: i..i + 1,
                    output: j..j,
                });
                i += 1;
                continue;
            }
        }
        // An unlisted edit: prefer a change over a drop and an add.
        if i < n && j < m && cost[idx(i + 1, j + 1)].saturating_add(1) == here {
            push_unlisted(&mut edits, EditKind::Changed, i..i + 1, j..j + 1);
            i += 1;
            j += 1;
        } else if i < n && cost[idx(i + 1, j)].saturating_add(1) == here {
            push_unlisted(&mut edits, EditKind::Dropped, i..i + 1, j..j);
            i += 1;
        } else if j < m {
            push_unlisted(&mut edits, EditKind::Added, i..i, j..j + 1);
            j += 1;
        } else {
            // Unreachable: a cost is always one of the above; kept total.
            break;
        }
    }
    Alignment {
        cost: cost[idx(0, 0)] as usize,
        edits,
    }
}

/// Merges an unlisted edit into the previous one of the same kind when they touch.
fn push_unlisted(
    edits: &mut Vec<Edit>,
    kind: EditKind,
    spoken: Range<usize>,
    output: Range<usize>,
) {
    if let Some(last) = edits.last_mut()
        && last.kind == kind
        && last.spoken.end == spoken.start
        && last.output.end == output.start
    {
        last.spoken.end = spoken.end;
        last.output.end = output.end;
        return;
    }
    edits.push(Edit {
        kind,
        spoken,
        output,
    });
}

/// Two or three words written as one, or one as two or three ("web site" ↔ "website"), and
/// digits grouped otherwise ("555 1234" ↔ "5551234"): per spoken position, (output position,
/// spoken taken, output taken). Found through a table of the joined runs of each side, so the
/// cost is linear, not one comparison per pair of positions.
fn joins_of(s: &Text, o: &Text) -> Vec<Vec<(usize, usize, usize)>> {
    let mut out = vec![Vec::new(); s.len()];
    // The joined runs of `t`: key → (start, length).
    let runs = |t: &Text| -> HashMap<String, Vec<(usize, usize)>> {
        let mut map: HashMap<String, Vec<(usize, usize)>> = HashMap::new();
        for start in 0..t.len() {
            for k in 2..=3 {
                if start + k > t.len() {
                    break;
                }
                let run = &t.tokens[start..start + k];
                let joined = if run.iter().all(|x| matches!(x.kind, Kind::Word)) {
                    Some(concat(run))
                } else {
                    digits_of(run, k)
                };
                if let Some(key) = joined {
                    map.entry(key).or_default().push((start, k));
                }
            }
        }
        map
    };
    // The keys one token may stand for: a word's key, a number's readings.
    let singles = |t: &Token| -> Vec<String> {
        match t.num() {
            Some(n) if !n.negative => n.readings.clone(),
            Some(_) => Vec::new(),
            None => vec![t.key.clone()],
        }
    };
    let spoken_runs = runs(s);
    for (j, tok) in o.tokens.iter().enumerate() {
        for key in singles(tok) {
            for &(i, k) in spoken_runs.get(&key).into_iter().flatten() {
                let same_kind = s.tokens[i].num().is_some() == tok.num().is_some();
                if same_kind {
                    out[i].push((j, k, 1));
                }
            }
        }
    }
    let output_runs = runs(o);
    for (i, tok) in s.tokens.iter().enumerate() {
        for key in singles(tok) {
            for &(j, k) in output_runs.get(&key).into_iter().flatten() {
                if o.tokens[j].num().is_some() == tok.num().is_some() {
                    out[i].push((j, 1, k));
                }
            }
        }
    }
    out
}

/// The first readings of `k` number tokens written one after another.
fn digits_of(ts: &[Token], k: usize) -> Option<String> {
    if ts.len() < k {
        return None;
    }
    let mut out = String::new();
    for t in ts {
        let n = t.num()?;
        if n.negative {
            return None;
        }
        let r = n.readings.first()?;
        if !r.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        out.push_str(r);
    }
    Some(out)
}

fn concat(ts: &[Token]) -> String {
    ts.iter().map(|t| t.key.as_str()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(spoken: &str, output: &str) -> usize {
        align(&Text::new(spoken), &Text::new(output)).cost
    }

    #[test]
    fn listed_edits_cost_nothing() {
        assert_eq!(
            cost(
                "um so I I think we should uh move it",
                "I think we should move it."
            ),
            0
        );
        assert_eq!(
            cost(
                "can you can you send me the the report by friday no by thursday",
                "Can you send me the report by Thursday?"
            ),
            0
        );
        assert_eq!(
            cost(
                "the meeting is on Tuesday I mean Wednesday",
                "The meeting is on Wednesday."
            ),
            0
        );
        assert_eq!(
            cost(
                "we need two coffees make that three coffees",
                "We need three coffees."
            ),
            0
        );
        assert_eq!(
            cost(
                "let's meet at noon scratch that let's meet at one",
                "Let's meet at one."
            ),
            0
        );
        assert_eq!(
            cost(
                "dear team comma the release is delayed period",
                "Dear team, the release is delayed."
            ),
            0
        );
        assert_eq!(cost("my PIN is one two three four", "My PIN is 1234."), 0);
        assert_eq!(cost("check the web site", "Check the website."), 0);
        assert_eq!(
            cost("call five five five one two three four", "Call 555-1234."),
            0
        );
    }

    #[test]
    fn other_edits_cost_one_each() {
        assert_eq!(
            cost("I can't make it on Tuesday", "I can make it on Tuesday."),
            1
        );
        assert_eq!(
            cost(
                "my PIN is one two three four",
                "My PIN is four three two one."
            ),
            1
        );
        assert_eq!(
            cost(
                "let's meet at three no at four tomorrow",
                "Let's meet at three tomorrow."
            ),
            1
        );
        assert_eq!(
            cost(
                "the trial period ends on Friday",
                "The trial ends on Friday."
            ),
            1
        );
        assert_eq!(cost("it is not not true", "It is not true."), 1);
        assert_eq!(cost("no I will not sign it", "I will not sign it."), 1);
    }
}
