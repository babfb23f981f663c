//! Projection, layer one of three: leaf selection, path, conversation and the resolved
//! metadata of a session — computed from the [`SessionIndex`] alone, without reading bodies.
//!
//! Invariants:
//! - Leaf rules: omitted → the last entry of any type (header only → empty); explicit null →
//!   empty ancestry; an explicit id that does not exist is an error, never a fallback.
//! - Only an authoritative index (no blocking diagnostic) is projected.
//! - Session name/archived and labels are global (file order); custom state is branch-local.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use super::index::{EntryKind, SessionIndex};

/// Which leaf to project.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum LeafSelector {
    /// The last entry in file order, of any type.
    #[default]
    Default,
    /// Empty ancestry.
    Null,
    /// This entry; it must exist.
    Id(String),
}

/// Why a projection was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProjectError {
    /// A blocking diagnostic (or no header): the file is readable for diagnostics only.
    #[error("project.not-authoritative: the file has contract violations that block projection")]
    NotAuthoritative,
    /// An explicit leaf id that is not in the file.
    #[error("project.leaf-not-found: the selected leaf is not an entry of this session")]
    LeafNotFound,
}

impl ProjectError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            ProjectError::NotAuthoritative => "project.not-authoritative",
            ProjectError::LeafNotFound => "project.leaf-not-found",
        }
    }
}

/// The resolved view of one leaf. Positions index into [`SessionIndex::entries`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Projection {
    pub leaf: Option<u32>,
    /// Root to leaf.
    pub path: Vec<u32>,
    /// `message` and `custom_message` entries on the path that no removal on the path excludes.
    pub conversation: Vec<u32>,
    /// Per `customType`, the latest `custom` entry on the path.
    pub custom_state: BTreeMap<Arc<str>, u32>,
}

/// Projects `index` at `leaf`.
pub fn project(index: &SessionIndex, leaf: &LeafSelector) -> Result<Projection, ProjectError> {
    if !index.is_authoritative() {
        return Err(ProjectError::NotAuthoritative);
    }
    let leaf = match leaf {
        LeafSelector::Default => index.entries().len().checked_sub(1).map(|i| i as u32),
        LeafSelector::Null => None,
        LeafSelector::Id(id) => Some(index.position(id).ok_or(ProjectError::LeafNotFound)?),
    };
    let mut path = Vec::new();
    let mut cursor = leaf;
    while let Some(pos) = cursor {
        path.push(pos);
        cursor = index.entry(pos).parent();
    }
    path.reverse();

    let removed: HashSet<u32> = path
        .iter()
        .filter_map(|&p| index.entry(p).removal_target())
        .collect();
    let conversation = path
        .iter()
        .copied()
        .filter(|p| {
            matches!(
                index.entry(*p).kind(),
                EntryKind::Message | EntryKind::CustomMessage
            ) && !removed.contains(p)
        })
        .collect();
    let mut custom_state = BTreeMap::new();
    for &p in &path {
        if let Some(t) = index.custom_type(p) {
            custom_state.insert(t.clone(), p);
        }
    }
    Ok(Projection {
        leaf,
        path,
        conversation,
        custom_state,
    })
}

/// The leaf and the surviving conversation of `index` at `leaf` — [`project`]'s `leaf` and
/// `conversation` — without holding the path: one walk from the leaf to the root. A removal
/// always lies below its target on the path, so the walk meets it first. For readers that
/// need nothing else (`persyk context`): on a long chain the path is as long as the file.
pub fn project_conversation(
    index: &SessionIndex,
    leaf: &LeafSelector,
) -> Result<(Option<u32>, PositionSet), ProjectError> {
    if !index.is_authoritative() {
        return Err(ProjectError::NotAuthoritative);
    }
    let leaf = match leaf {
        LeafSelector::Default => index.entries().len().checked_sub(1).map(|i| i as u32),
        LeafSelector::Null => None,
        LeafSelector::Id(id) => Some(index.position(id).ok_or(ProjectError::LeafNotFound)?),
    };
    let mut removed = HashSet::new();
    let mut conversation = PositionSet::new(index.len());
    let mut cursor = leaf;
    while let Some(pos) = cursor {
        let e = index.entry(pos);
        if let Some(t) = e.removal_target() {
            removed.insert(t);
        } else if matches!(e.kind(), EntryKind::Message | EntryKind::CustomMessage)
            && !removed.contains(&pos)
        {
            conversation.insert(pos);
        }
        cursor = e.parent();
    }
    Ok((leaf, conversation))
}

/// A set of positions of one index, one bit per entry, iterated in ascending order. A path's
/// positions ascend from the root to the leaf (a parent is always on an earlier line), so a
/// conversation kept this way iterates in path order: 1 bit per entry of the file instead of
/// 32 per entry of the conversation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PositionSet {
    words: Vec<u64>,
    len: usize,
}

impl PositionSet {
    /// An empty set for an index of `entries` entries.
    pub fn new(entries: usize) -> PositionSet {
        PositionSet {
            words: vec![0; entries.div_ceil(64)],
            len: 0,
        }
    }
    /// Adds `pos` (which must be below the index's length).
    pub fn insert(&mut self, pos: u32) {
        let (w, bit) = (pos as usize / 64, 1u64 << (pos % 64));
        if self.words.len() <= w {
            self.words.resize(w + 1, 0);
        }
        if self.words[w] & bit == 0 {
            self.words[w] |= bit;
            self.len += 1;
        }
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The positions, ascending.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = u32> + '_ {
        SetIter {
            words: &self.words,
            at: 0,
            word: self.words.first().copied().unwrap_or(0),
            left: self.len,
        }
    }
    /// The positions, ascending, as a vector.
    pub fn to_vec(&self) -> Vec<u32> {
        self.iter().collect()
    }
}

struct SetIter<'a> {
    words: &'a [u64],
    /// Index of the word `word` holds the unvisited bits of.
    at: usize,
    word: u64,
    left: usize,
}

impl Iterator for SetIter<'_> {
    type Item = u32;
    fn next(&mut self) -> Option<u32> {
        while self.word == 0 {
            self.at += 1;
            self.word = *self.words.get(self.at)?;
        }
        let bit = self.word.trailing_zeros();
        self.word &= self.word - 1;
        self.left -= 1;
        Some((self.at * 64) as u32 + bit)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for SetIter<'_> {}
