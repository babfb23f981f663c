//! The realtime engine: the OpenAI Realtime API client and everything between its websocket
//! and the session store — sanitized retention of every protocol event, provider-order
//! publication of canonical messages, and removal with provider acknowledgement.
//!
//! Modules:
//! - [`sanitize`] — credentials out of payloads, URLs and headers before persistence or logs.
//! - [`ordering`] — provider predecessor order → canonical user/assistant messages and gaps.
//! - [`fake`] — a loopback fake of the Realtime API that the client is tested against.
//! - [`turns`] — client-side turns: when to commit for models without server VAD.
//!
//! It implements the [`crate::recognize::Recognizer`] seam; it imports `session`, `audio`,
//! `endpoint` and `recognize`, never `local`, `capture` or the pipeline. Nothing here touches
//! the UI; the session core never imports this module.

pub mod engine;
pub mod fake;
pub mod ordering;
pub mod protocol;
pub mod removal;
pub mod restart;
pub mod sanitize;
pub mod turns;
