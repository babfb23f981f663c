//! A deliberately naive in-memory model of the format v1 resolution rules, written straight
//! from `schema-v1.md` ("Resolution rules") without looking at `src/session/project.rs`.
//!
//! Shared by `tests/proptest_model.rs` and the `ops` fuzz target (`fuzz/fuzz_targets/ops.rs`
//! includes this file by path), so both check the library against the same oracle.
//!
//! Everything is keyed by entry *id* (not index position), so a comparison with the library
//! also checks that positions map back to the right ids.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};

use persyk::session::diag::MAX_KEPT_DIAGNOSTICS;
use persyk::session::format::{Entry, EntryBody};
use persyk::session::record::MAX_RECORD_BYTES;
use persyk::session::{Code, LeafSelector, ProjectError, SessionIndex, project};

/// What one leaf resolves to, by id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub leaf: Option<String>,
    /// Root to leaf.
    pub path: Vec<String>,
    /// `message`/`custom_message` entries on the path minus removal targets on the path.
    pub conversation: Vec<String>,
    /// `customType` → id of the latest `custom` entry on the path.
    pub custom_state: BTreeMap<String, String>,
}

/// The model: the entries of one file (after the header), in file order.
pub struct Model<'a> {
    entries: &'a [Entry],
    pos: HashMap<&'a str, usize>,
    parent: Vec<Option<usize>>,
}

impl<'a> Model<'a> {
    /// Builds the model. Every `parentId` must name an earlier entry (the generators only
    /// produce such files); ids must be unique.
    pub fn new(entries: &'a [Entry]) -> Model<'a> {
        let mut pos = HashMap::new();
        let mut parent = Vec::with_capacity(entries.len());
        for (i, e) in entries.iter().enumerate() {
            let p = e.parent_id.as_deref().map(|p| {
                *pos.get(p)
                    .unwrap_or_else(|| panic!("model: parent {p:?} of entry {i} is not earlier"))
            });
            parent.push(p);
            assert!(
                pos.insert(e.id.as_str(), i).is_none(),
                "model: duplicate id {:?}",
                e.id
            );
        }
        Model {
            entries,
            pos,
            parent,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn position(&self, id: &str) -> Option<usize> {
        self.pos.get(id).copied()
    }

    /// Positions from the root to `leaf` (inclusive); empty for `None`.
    pub fn path(&self, leaf: Option<usize>) -> Vec<usize> {
        let mut out = Vec::new();
        let mut cur = leaf;
        while let Some(p) = cur {
            out.push(p);
            cur = self.parent[p];
        }
        out.reverse();
        out
    }

    /// Whether `ancestor` lies on the path from the root to `node` (inclusive).
    pub fn is_ancestor_or_self(&self, ancestor: usize, node: usize) -> bool {
        self.path(Some(node)).contains(&ancestor)
    }

    fn is_message_like(&self, p: usize) -> bool {
        matches!(
            self.entries[p].body,
            EntryBody::Message(_) | EntryBody::CustomMessage(_)
        )
    }

    /// The `message`/`custom_message` entries on the path to `node` (inclusive): the valid
    /// targets of a removal whose parent is `node`.
    pub fn removable_from(&self, node: usize) -> Vec<usize> {
        self.path(Some(node))
            .into_iter()
            .filter(|&p| self.is_message_like(p))
            .collect()
    }

    /// The diagnostic a `message.removed` with this parent and target must get, if any.
    pub fn removal_problem(&self, parent: Option<usize>, target: usize) -> Option<Code> {
        if !self.is_message_like(target) {
            Some(Code::RemovalTargetNotMessage)
        } else if !parent.is_some_and(|p| self.is_ancestor_or_self(target, p)) {
            Some(Code::RemovalTargetNotAncestor)
        } else {
            None
        }
    }

    /// Resolves a leaf selector; `None` when an explicit id is not an entry.
    pub fn view(&self, leaf: &LeafSelector) -> Option<View> {
        let leaf = match leaf {
            LeafSelector::Default => self.entries.len().checked_sub(1),
            LeafSelector::Null => None,
            LeafSelector::Id(id) => Some(self.position(id)?),
        };
        let path = self.path(leaf);
        let removed: Vec<usize> = path
            .iter()
            .filter_map(|&p| match &self.entries[p].body {
                EntryBody::MessageRemoved(r) => Some(self.pos[r.target_id.as_str()]),
                _ => None,
            })
            .collect();
        let conversation = path
            .iter()
            .copied()
            .filter(|&p| self.is_message_like(p) && !removed.contains(&p))
            .map(|p| self.entries[p].id.clone())
            .collect();
        let mut custom_state = BTreeMap::new();
        for &p in &path {
            if let EntryBody::Custom(c) = &self.entries[p].body {
                custom_state.insert(c.custom_type.clone(), self.entries[p].id.clone());
            }
        }
        Some(View {
            leaf: leaf.map(|p| self.entries[p].id.clone()),
            path: path.iter().map(|&p| self.entries[p].id.clone()).collect(),
            conversation,
            custom_state,
        })
    }

    /// The latest `session_info.name` in file order.
    pub fn name(&self) -> Option<&str> {
        self.entries.iter().rev().find_map(|e| match &e.body {
            EntryBody::SessionInfo(s) => s.name.as_deref(),
            _ => None,
        })
    }

    /// The latest `session_info.archived` in file order.
    pub fn archived(&self) -> Option<bool> {
        self.entries.iter().rev().find_map(|e| match &e.body {
            EntryBody::SessionInfo(s) => s.archived,
            _ => None,
        })
    }

    /// Current labels: target id → label; the latest label per target wins, null clears.
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut latest: BTreeMap<String, Option<String>> = BTreeMap::new();
        for e in self.entries {
            if let EntryBody::Label(l) = &e.body {
                latest.insert(l.target_id.clone(), l.label.clone());
            }
        }
        latest
            .into_iter()
            .filter_map(|(t, l)| l.map(|l| (t, l)))
            .collect()
    }
}

/// The library's projection of `leaf`, translated to ids.
pub fn library_view(index: &SessionIndex, leaf: &LeafSelector) -> Result<View, ProjectError> {
    let p = project(index, leaf)?;
    assert_eq!(
        persyk::session::project_conversation(index, leaf).map(|(l, c)| (l, c.to_vec())),
        Ok((p.leaf, p.conversation.clone())),
        "project_conversation agrees with project"
    );
    let n = index.entries().len();
    let id = |pos: u32| -> String {
        assert!((pos as usize) < n, "projected position {pos} out of {n}");
        index.id(pos).to_string()
    };
    Ok(View {
        leaf: p.leaf.map(id),
        path: p.path.iter().copied().map(id).collect(),
        conversation: p.conversation.iter().copied().map(id).collect(),
        custom_state: p
            .custom_state
            .iter()
            .map(|(t, &pos)| (t.to_string(), id(pos)))
            .collect(),
    })
}

/// The library's current labels, translated to ids.
pub fn library_labels(index: &SessionIndex) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (pos, label) in index.labels() {
        let prev = out.insert(index.id(pos).to_string(), label.to_owned());
        assert!(prev.is_none(), "two current labels for position {pos}");
    }
    out
}

/// Asserts that a valid index agrees with the model: entry table, global metadata and the
/// projection of every selector in `leaves` (plus Default, Null and a missing id).
pub fn assert_index_matches(index: &SessionIndex, model: &Model<'_>, leaves: &[LeafSelector]) {
    assert!(
        index.is_authoritative(),
        "not authoritative: {:?}",
        index.diagnostics()
    );
    assert_eq!(index.entries().len(), model.len(), "entry count");
    for (i, (ie, e)) in index.entries().iter().zip(model.entries).enumerate() {
        assert_eq!(index.id(i as u32), e.id.as_str(), "id of entry {i}");
        assert_eq!(ie.kind().as_str(), e.body.type_name(), "kind of entry {i}");
        assert_eq!(
            ie.parent().map(|p| p as usize),
            model.parent[i],
            "parent of entry {i}"
        );
        assert_eq!(
            index.position(&e.id),
            Some(i as u32),
            "position of {}",
            e.id
        );
    }
    assert_eq!(index.name(), model.name(), "session name");
    assert_eq!(index.archived(), model.archived(), "archived");
    assert_eq!(library_labels(index), model.labels(), "labels");

    let missing = LeafSelector::Id("no-such-entry.zz9".into());
    assert_eq!(model.view(&missing), None);
    assert_eq!(
        library_view(index, &missing),
        Err(ProjectError::LeafNotFound),
        "a missing explicit leaf must fail, never fall back"
    );
    let fixed = [LeafSelector::Default, LeafSelector::Null];
    for leaf in fixed.iter().chain(leaves) {
        let expected = model.view(leaf).expect("model leaf exists");
        assert_eq!(
            library_view(index, leaf).as_ref(),
            Ok(&expected),
            "projection of {leaf:?}"
        );
    }
}

/// Offsets of every "\n".
fn newline_positions(bytes: &[u8]) -> impl Iterator<Item = usize> + '_ {
    bytes
        .iter()
        .enumerate()
        .filter_map(|(i, &b)| (b == b'\n').then_some(i))
}

/// Invariants every scan result keeps, whatever the input: line accounting, known codes in
/// line order, entry spans that are whole lines, parents before children, and an
/// authoritative index whose projections are well-formed (a parent chain ending at the leaf,
/// a conversation drawn from it, custom state pointing at `custom` entries on it).
pub fn check_scan_invariants(bytes: &[u8], index: &SessionIndex) {
    let newlines = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
    assert_eq!(index.committed_lines(), newlines);
    let committed = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    assert_eq!(index.committed_len(), committed as u64);
    match index.tail() {
        None => assert_eq!(
            committed,
            bytes.len(),
            "bytes after the last newline but no tail"
        ),
        Some(t) => {
            assert_eq!(
                (t.offset, t.len),
                (committed as u64, (bytes.len() - committed) as u64)
            );
            assert_eq!(t.line, newlines + 1);
        }
    }
    assert!(index.diagnostics().len() <= MAX_KEPT_DIAGNOSTICS);
    assert!(index.diagnostics_total() >= index.diagnostics().len() as u64);
    assert_eq!(index.is_valid(), index.diagnostics_total() == 0);
    let mut last = 0;
    for d in index.diagnostics() {
        assert!(Code::ALL.contains(&d.code), "unknown code {:?}", d.code);
        assert!(
            d.line <= newlines + 1,
            "diagnostic line {} > {}",
            d.line,
            newlines + 1
        );
        assert!(d.line >= last, "diagnostics out of line order");
        last = d.line;
    }
    // line_starts[k] is the offset of line k + 1.
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(newline_positions(bytes).map(|p| p + 1))
        .collect();
    let mut prev_line = 0;
    for (i, e) in index.entries().iter().enumerate() {
        assert!(
            e.parent().is_none_or(|p| (p as usize) < i),
            "parent after child"
        );
        let start = e.offset() as usize;
        let end = start + e.len_bytes() as usize;
        assert!(end < bytes.len() && bytes[end] == b'\n', "entry span");
        assert!(
            start == 0 || bytes[start - 1] == b'\n',
            "entry span starts mid-line"
        );
        assert!(
            !bytes[start..end].contains(&b'\n'),
            "entry span has a newline"
        );
        assert!(e.len_bytes() as usize <= MAX_RECORD_BYTES);
        let line = line_starts.binary_search(&start).map(|k| k as u64 + 1);
        let entry_line = index.line(i as u32);
        assert_eq!(Ok(entry_line), line, "line number of entry {i}");
        assert!(entry_line > prev_line.max(1), "entries out of line order");
        prev_line = entry_line;
        assert_eq!(
            index.position(&index.id(i as u32)),
            Some(i as u32),
            "id lookup"
        );
    }
    if index.is_authoritative() {
        let n = index.entries().len() as u32;
        let mut leaves = vec![LeafSelector::Default, LeafSelector::Null];
        for pos in [0, n / 2, n.saturating_sub(1)] {
            if pos < n {
                leaves.push(LeafSelector::Id(index.id(pos).into_owned()));
            }
        }
        for leaf in leaves {
            let p = project(index, &leaf).expect("authoritative index projects");
            let expected_leaf = match &leaf {
                LeafSelector::Default => n.checked_sub(1),
                LeafSelector::Null => None,
                LeafSelector::Id(id) => index.position(id),
            };
            assert_eq!(p.leaf, expected_leaf, "leaf of {leaf:?}");
            assert_eq!(p.path.last().copied(), p.leaf, "path ends at the leaf");
            assert!(p.path.iter().all(|&x| x < n));
            assert_eq!(
                p.path.first().map(|&r| index.entry(r).parent()),
                p.leaf.map(|_| None)
            );
            for w in p.path.windows(2) {
                assert_eq!(
                    index.entry(w[1]).parent(),
                    Some(w[0]),
                    "path is a parent chain"
                );
            }
            let mut on_path = p.path.iter();
            for c in &p.conversation {
                assert!(
                    on_path.any(|x| x == c),
                    "conversation not an ordered subset of path"
                );
            }
            for (t, &x) in &p.custom_state {
                assert!(p.path.contains(&x), "custom state off the path");
                assert_eq!(index.custom_type(x), Some(t), "custom state type");
            }
        }
    }
}
