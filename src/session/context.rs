//! Generic context conversion, layer two of three: effective history → model-neutral
//! messages a provider adapter can consume.
//!
//! Invariants:
//! - Only `message` and `custom_message` entries contribute; `custom_message.details` and
//!   tool-result `details` never join content.
//! - Unknown blocks are skipped here (they stay in history); orphan tool results — a
//!   `toolResult` whose `toolCallId` no earlier assistant `toolCall` carries — are dropped
//!   here and only here. Both are counted, so nothing disappears silently.
//! - [`ContextBuilder`] converts one history item at a time (it keeps only the tool-call ids
//!   seen so far), so a caller streaming history never holds the conversation.

use std::collections::HashSet;
use std::sync::Arc;

use super::format::{Block, EntryBody, Role};
use super::history::HistoryItem;

/// One message of generic context.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextMessage {
    /// The history entry it came from.
    pub source_id: Arc<str>,
    pub role: Role,
    /// Known blocks only.
    pub content: Vec<Block>,
    /// For tool results: the call they answer.
    pub tool_call_id: Option<String>,
}

/// The converted conversation plus what the conversion left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Context {
    pub messages: Vec<ContextMessage>,
    pub skipped_unknown_blocks: usize,
    pub dropped_orphan_tool_results: usize,
}

/// Converts history to context one item at a time, in path order.
#[derive(Debug, Default)]
pub struct ContextBuilder {
    calls: HashSet<String>,
    skipped_unknown_blocks: usize,
    dropped_orphan_tool_results: usize,
}

impl ContextBuilder {
    pub fn new() -> ContextBuilder {
        ContextBuilder::default()
    }

    /// The context message of `item`, or `None` when it contributes none (not a message, or
    /// an orphan tool result, which is counted).
    pub fn push(&mut self, item: &HistoryItem) -> Option<ContextMessage> {
        let (role, blocks, tool_call_id) = match &item.entry.body {
            EntryBody::Message(m) => (
                m.role,
                m.content.clone(),
                m.tool_result.as_ref().map(|t| t.tool_call_id.clone()),
            ),
            EntryBody::CustomMessage(cm) => (Role::User, cm.content.to_blocks(), None),
            _ => return None,
        };
        if role == Role::ToolResult
            && !tool_call_id
                .as_ref()
                .is_some_and(|id| self.calls.contains(id))
        {
            self.dropped_orphan_tool_results += 1;
            return None;
        }
        let mut content = Vec::with_capacity(blocks.len());
        for b in blocks {
            match b {
                Block::Unknown(_) => self.skipped_unknown_blocks += 1,
                Block::ToolCall { ref id, .. } if role == Role::Assistant => {
                    self.calls.insert(id.clone());
                    content.push(b);
                }
                other => content.push(other),
            }
        }
        Some(ContextMessage {
            source_id: item.id.clone(),
            role,
            content,
            tool_call_id,
        })
    }

    /// Unknown blocks skipped so far.
    pub fn skipped_unknown_blocks(&self) -> usize {
        self.skipped_unknown_blocks
    }

    /// Orphan tool results dropped so far.
    pub fn dropped_orphan_tool_results(&self) -> usize {
        self.dropped_orphan_tool_results
    }
}

/// Converts effective history to generic context.
pub fn to_context(history: &[HistoryItem]) -> Context {
    let mut builder = ContextBuilder::new();
    let messages = history.iter().filter_map(|i| builder.push(i)).collect();
    Context {
        messages,
        skipped_unknown_blocks: builder.skipped_unknown_blocks,
        dropped_orphan_tool_results: builder.dropped_orphan_tool_results,
    }
}
