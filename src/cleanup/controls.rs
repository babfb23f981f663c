//! Control and direction-override characters out of a model's reply, before the fidelity
//! guard reads it ([`strip`]): what a model returns is pasted into the user's app, stored in
//! the session and printed by the CLI, and none of those should carry a NUL, a terminal
//! escape sequence, a carriage return that rewrites a line, a bell, or an override that shows
//! text in another order than it is stored (the "Trojan Source" characters).
//!
//! Invariants:
//! - Removed: every C0 control (U+0000–U+001F) except line feed and tab, DEL (U+007F), every
//!   C1 control (U+0080–U+009F), the bidirectional embeddings and overrides U+202A–U+202E
//!   and the isolates U+2066–U+2069 ([`is_hidden_control`]). A carriage return goes too: a
//!   CR LF becomes a line feed.
//! - Kept: every other character, in order — line feeds and tabs (a message's layout), and
//!   the direction *marks* U+200E, U+200F and U+061C: they are how Hebrew and Arabic text
//!   places punctuation correctly, and a mark only gives one position a direction — it
//!   cannot reorder a stretch of text the way an override or an isolate does.
//! - Pure and total: any string in, a string out, never longer.

/// Whether `c` is removed from a reply (and escaped by the CLI's human output): a C0 control
/// other than `\n` and `\t`, DEL, a C1 control, or a bidirectional embedding, override or
/// isolate.
pub fn is_hidden_control(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{8}'
        | '\u{B}'..='\u{1F}'
        | '\u{7F}'..='\u{9F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2066}'..='\u{2069}')
}

/// `text` without the characters [`is_hidden_control`] names.
pub fn strip(text: &str) -> String {
    text.chars().filter(|&c| !is_hidden_control(c)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn controls_and_overrides_go_and_layout_stays() {
        assert_eq!(
            strip("Hi\u{0}there\u{1b}[31m red\u{1b}[0m\u{7}"),
            "Hithere[31m red[0m"
        );
        assert_eq!(strip("one\r\ntwo\rthree"), "one\ntwothree");
        assert_eq!(strip("a\tb\nc"), "a\tb\nc");
        // An override that would show "txt.exe" as "exe.txt", and an isolate.
        assert_eq!(strip("invoice\u{202E}txt.exe"), "invoicetxt.exe");
        assert_eq!(strip("\u{2067}abc\u{2069}"), "abc");
        // C1: NEL and CSI.
        assert_eq!(strip("x\u{85}y\u{9b}z"), "xyz");
        // Direction marks and ordinary text in any script stay.
        let rtl = "\u{5e9}\u{5dc}\u{5d5}\u{5dd}\u{200f}, hello\u{200e} \u{61c}\u{627}";
        assert_eq!(strip(rtl), rtl);
        assert_eq!(strip("Grüße, 東京 — 👋"), "Grüße, 東京 — 👋");
    }

    #[test]
    fn exactly_the_named_characters_are_hidden() {
        let hidden: Vec<u32> = (0u32..=0x3000)
            .filter_map(char::from_u32)
            .filter(|&c| is_hidden_control(c))
            .map(u32::from)
            .collect();
        let mut expected: Vec<u32> = (0..=0x1F).filter(|&c| c != 0x0A && c != 0x09).collect();
        expected.extend(0x7F..=0x9F);
        expected.extend(0x202A..=0x202E);
        expected.extend(0x2066..=0x2069);
        assert_eq!(hidden, expected);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Whatever the reply: nothing hidden survives, every other character survives in
        /// order, and stripping twice changes nothing more.
        #[test]
        fn stripping_keeps_everything_else_in_order(text in "\\PC*|[\\x00-\\x{A0}\\x{2000}-\\x{2070}a-z ]{0,64}") {
            let out = strip(&text);
            prop_assert!(!out.chars().any(is_hidden_control));
            // As many characters as the text has visible ones, and in its order: a
            // subsequence of the text.
            let visible = text.chars().filter(|&c| !is_hidden_control(c)).count();
            prop_assert_eq!(out.chars().count(), visible);
            let mut rest = text.chars();
            prop_assert!(out.chars().all(|c| rest.any(|t| t == c)));
            prop_assert!(out.len() <= text.len());
            prop_assert_eq!(strip(&out), out.clone());
        }
    }
}
