//! `ops`: the input is a program that builds a session file through the writer types.
//!
//! Each op is one byte (`op % 8`) followed by its operand bytes:
//!
//! | op | appends | operands |
//! |---|---|---|
//! | 0, 1 | `message` (user/assistant) | role, parent, text |
//! | 2 | `message.removed`, valid | host entry, target among the host's message ancestors |
//! | 3 | `message.removed`, unchecked | target entry, parent — may be invalid on purpose |
//! | 4 | `label` | target entry, null-or-text |
//! | 5 | `session_info` | flags, name text |
//! | 6 | `custom` | customType, parent, text data |
//! | 7 | `custom_message` | customType, parent, text or blocks |
//!
//! A parent operand `b` picks entry `b % (n + 1)`, where `n` means null. Missing operand bytes
//! end the program. The model (`tests/session_model/mod.rs`) predicts the diagnostics exactly
//! (only unchecked removals may be invalid); a file predicted valid must scan with none, and
//! its projections (default, null, every entry as explicit leaf, a missing id) and global
//! metadata must match the model. Every entry must also round-trip through `to_line` /
//! `from_line`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use persyk::session::format::{
    Block, Custom, CustomContent, CustomMessage, Entry, EntryBody, Header, Label, Message,
    MessageRemoved, Role, SessionInfo,
};
use persyk::session::{Code, LeafSelector, ProjectError, project, scan_bytes};
use serde_json::Value;

#[path = "../../tests/session_model/mod.rs"]
mod session_model;

use session_model::Model;

const MAX_OPS: usize = 256;
const CUSTOM_TYPES: &[&str] = &["persyk.ui", "persyk.recording-state", "x", "ünï \"q\" 😀"];

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }
    /// Up to 15 bytes, as lossy UTF-8 (so any scalar value, astral ones included, can appear).
    fn text(&mut self) -> Option<String> {
        let len = usize::from(self.byte()? % 16).min(self.0.len());
        let (t, rest) = self.0.split_at(len);
        self.0 = rest;
        Some(String::from_utf8_lossy(t).into_owned())
    }
    /// A parent among `n` entries, or null.
    fn parent(&mut self, n: usize) -> Option<Option<usize>> {
        let k = usize::from(self.byte()?) % (n + 1);
        Some((k < n).then_some(k))
    }
}

/// Builds the entries (and the diagnostics the model expects) from the program.
fn build(data: &[u8]) -> (Vec<Entry>, Vec<(u64, Code)>) {
    let mut input = Input(data);
    let mut entries: Vec<Entry> = Vec::new();
    let mut expected = Vec::new();
    while entries.len() < MAX_OPS {
        let Some(op) = input.byte() else { break };
        let n = entries.len();
        let built = {
            let model = Model::new(&entries);
            step(op, &mut input, &entries, &model)
        };
        let Some((parent, body, problem)) = built else {
            if input.0.is_empty() {
                break;
            }
            continue;
        };
        if let Some(code) = problem {
            expected.push((n as u64 + 2, code)); // line 1 is the header
        }
        entries.push(Entry {
            id: format!("e{n}"),
            parent_id: parent.map(|p: usize| entries[p].id.clone()),
            timestamp: format!("2026-01-01T00:{:02}:{:02}.{:03}Z", n / 60 % 60, n % 60, n),
            body,
        });
    }
    (entries, expected)
}

type Step = (Option<usize>, EntryBody, Option<Code>);

fn step(op: u8, input: &mut Input<'_>, entries: &[Entry], model: &Model<'_>) -> Option<Step> {
    let n = entries.len();
    Some(match op % 8 {
        0 | 1 => {
            let role = if op.is_multiple_of(2) {
                Role::User
            } else {
                Role::Assistant
            };
            let parent = input.parent(n)?;
            let text = input.text()?;
            let msg = Message::new(role, vec![Block::text(text)], u64::from(op) << 40);
            (parent, EntryBody::Message(msg), None)
        }
        2 => {
            let hosts: Vec<usize> = (0..n)
                .filter(|&p| !model.removable_from(p).is_empty())
                .collect();
            let host_sel = usize::from(input.byte()?);
            let target_sel = usize::from(input.byte()?);
            if hosts.is_empty() {
                return None;
            }
            let host = hosts[host_sel % hosts.len()];
            let targets = model.removable_from(host);
            let target = targets[target_sel % targets.len()];
            let body = EntryBody::MessageRemoved(MessageRemoved {
                target_id: entries[target].id.clone(),
            });
            (Some(host), body, None)
        }
        3 => {
            let target_sel = usize::from(input.byte()?);
            let parent = input.parent(n)?;
            if n == 0 {
                return None;
            }
            let target = target_sel % n;
            let problem = model.removal_problem(parent, target);
            let body = EntryBody::MessageRemoved(MessageRemoved {
                target_id: entries[target].id.clone(),
            });
            (parent, body, problem)
        }
        4 => {
            let target_sel = usize::from(input.byte()?);
            let flags = input.byte()?;
            let label = if flags & 1 == 0 {
                None
            } else {
                Some(input.text()?)
            };
            let parent = if flags & 2 == 0 {
                None
            } else {
                n.checked_sub(1)
            };
            if n == 0 {
                return None;
            }
            let body = EntryBody::Label(Label {
                target_id: entries[target_sel % n].id.clone(),
                label,
            });
            (parent, body, None)
        }
        5 => {
            let flags = input.byte()?;
            let name = if flags & 1 == 0 {
                None
            } else {
                Some(input.text()?)
            };
            let archived = match flags >> 1 & 3 {
                0 => None,
                1 => Some(false),
                _ => Some(true),
            };
            let parent = if flags & 8 == 0 {
                None
            } else {
                n.checked_sub(1)
            };
            (
                parent,
                EntryBody::SessionInfo(SessionInfo { name, archived }),
                None,
            )
        }
        6 => {
            let ty = CUSTOM_TYPES[usize::from(input.byte()?) % CUSTOM_TYPES.len()];
            let parent = input.parent(n)?;
            let data = Value::String(input.text()?);
            let body = EntryBody::Custom(Custom {
                custom_type: ty.to_owned(),
                data,
            });
            (parent, body, None)
        }
        _ => {
            let sel = input.byte()?;
            let ty = CUSTOM_TYPES[usize::from(sel) % CUSTOM_TYPES.len()];
            let parent = input.parent(n)?;
            let text = input.text()?;
            let content = if sel & 0x80 == 0 {
                CustomContent::Text(text)
            } else {
                CustomContent::Blocks(vec![Block::text(text)])
            };
            let body = EntryBody::CustomMessage(CustomMessage {
                custom_type: ty.to_owned(),
                content,
                display: sel & 0x40 != 0,
                details: (sel & 0x20 != 0).then(|| Value::from(u64::from(sel))),
            });
            (parent, body, None)
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let (entries, expected) = build(data);
    let header = Header {
        id: "fuzz-session".into(),
        timestamp: "2026-01-01T00:00:00Z".into(),
    };
    let mut file = header.to_line();
    file.push('\n');
    for e in &entries {
        let line = e.to_line();
        assert!(!line.contains('\n'));
        let back = Entry::from_line(&line).expect("writer output parses");
        assert_eq!(&back, e, "round trip of {line}");
        file.push_str(&line);
        file.push('\n');
    }
    let index = scan_bytes(file.as_bytes());
    session_model::check_scan_invariants(file.as_bytes(), &index);

    let got: Vec<(u64, Code)> = index
        .diagnostics()
        .iter()
        .map(|d| (d.line, d.code))
        .collect();
    assert_eq!(got, expected, "diagnostics");
    let model = Model::new(&entries);
    if expected.is_empty() {
        let leaves: Vec<LeafSelector> = entries
            .iter()
            .map(|e| LeafSelector::Id(e.id.clone()))
            .collect();
        session_model::assert_index_matches(&index, &model, &leaves);
    } else {
        assert!(!index.is_authoritative());
        assert_eq!(
            project(&index, &LeafSelector::Default),
            Err(ProjectError::NotAuthoritative)
        );
    }
});
