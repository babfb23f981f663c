//! Stored text as the CLI's human output prints it: a session file, a folder name or a
//! model's reply may hold a NUL, a terminal escape sequence (ESC `[` …, which recolours,
//! retitles or rewrites the terminal), a carriage return that overwrites the line, a bell, or
//! a bidirectional override that shows text in another order than it is stored. Every human
//! output command (`context`, `search`, `sessions`, `status`, `recover`, `check`, and the
//! transcript lines of `transcribe` and `dictate`) prints such text through [`text`] or
//! [`line`].
//!
//! Invariants:
//! - What [`persyk::cleanup::controls::is_hidden_control`] names (C0 controls but line feed
//!   and tab, DEL, C1 controls, bidirectional embeddings, overrides and isolates) is printed
//!   as its escape, `\u{1B}`, never as itself; [`line`] escapes line feeds and tabs too, so
//!   one stored value stays on its row.
//! - Text without such characters is printed as it is (no copy). `--json` output is not
//!   touched: JSON escapes every control itself, and it is for programs.

use std::borrow::Cow;
use std::fmt::Write as _;

use persyk::cleanup::controls::is_hidden_control;

/// `s` for a human reader, line feeds and tabs kept (a message's text).
pub fn text(s: &str) -> Cow<'_, str> {
    escape(s, is_hidden_control)
}

/// `s` for a human reader on one row: line feeds and tabs escaped as well (a label, a path,
/// an id).
pub fn line(s: &str) -> Cow<'_, str> {
    escape(s, |c| c == '\n' || c == '\t' || is_hidden_control(c))
}

fn escape(s: &str, hidden: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(&hidden) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if hidden(c) {
            let _ = write!(out, "\\u{{{:X}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_shown_as_escapes() {
        assert_eq!(
            text("red \u{1b}[31mALERT\u{7}\r"),
            "red \\u{1B}[31mALERT\\u{7}\\u{D}"
        );
        assert_eq!(text("one\ntwo\tthree"), "one\ntwo\tthree");
        assert_eq!(line("one\ntwo\tthree"), "one\\u{A}two\\u{9}three");
        assert_eq!(text("txt\u{202E}exe"), "txt\\u{202E}exe");
        assert_eq!(text("\u{0}\u{9b}"), "\\u{0}\\u{9B}");
        assert!(matches!(text("Grüße 東京 \u{200f}"), Cow::Borrowed(_)));
    }
}
