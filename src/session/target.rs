//! Target-API validation, layer three of three: can a given provider API carry this context?
//!
//! Invariants:
//! - Reports, never fails: an unsupported block is a [`TargetIssue`]; the history read that
//!   produced the context is untouched by it.

use super::context::Context;
use super::format::{Block, Role};

/// What a target API can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetCaps {
    pub name: &'static str,
    pub image: bool,
    pub audio: bool,
    pub thinking: bool,
    pub tool_calls: bool,
}

impl TargetCaps {
    /// The OpenAI Realtime API conversation items: text, audio, images, function calls; no
    /// reasoning blocks.
    pub const OPENAI_REALTIME: TargetCaps = TargetCaps {
        name: "openai-realtime",
        image: true,
        audio: true,
        thinking: false,
        tool_calls: true,
    };
    /// A plain text completion API.
    pub const TEXT_ONLY: TargetCaps = TargetCaps {
        name: "text-only",
        image: false,
        audio: false,
        thinking: false,
        tool_calls: false,
    };
}

/// One block the target cannot carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetIssue {
    /// Index into [`Context::messages`].
    pub message: usize,
    pub block_type: &'static str,
}

impl TargetIssue {
    pub const CODE: &'static str = "target.unsupported-block";
}

/// Lists every block of `ctx` that `caps` cannot carry.
pub fn check_target(ctx: &Context, caps: &TargetCaps) -> Vec<TargetIssue> {
    let mut issues = Vec::new();
    for (i, m) in ctx.messages.iter().enumerate() {
        if m.role == Role::ToolResult && !caps.tool_calls {
            issues.push(TargetIssue {
                message: i,
                block_type: "toolResult",
            });
        }
        for b in &m.content {
            let unsupported = match b {
                Block::Text { .. } | Block::Unknown(_) => None,
                Block::Image { .. } => (!caps.image).then_some("image"),
                Block::Audio { .. } => (!caps.audio).then_some("audio"),
                Block::Thinking { .. } => (!caps.thinking).then_some("thinking"),
                Block::ToolCall { .. } => (!caps.tool_calls).then_some("toolCall"),
            };
            if let Some(block_type) = unsupported {
                issues.push(TargetIssue {
                    message: i,
                    block_type,
                });
            }
        }
    }
    issues
}
