//! `validate`: arbitrary bytes as a session file.
//!
//! Checks, for every input:
//! - `scan_bytes` never panics; diagnostics are known codes, in line order, at lines that
//!   exist (≤ newlines + 1); entry spans, line numbers, tail and committed length add up; an
//!   authoritative index projects (default, null and explicit leaves) to well-formed,
//!   in-range positions (`check_scan_invariants`, shared with the proptests);
//! - `scan_reader` fed in small random chunks gives the same index as `scan_bytes`;
//! - `record::parse_record` never accepts a line longer than 1 MiB;
//! - in an authoritative file, every entry line reads back with `Entry::from_line`, and the
//!   file rewritten from those typed entries validates again with the same tree.
//!
//! Inflation: an input starting with 0xFF (never valid UTF-8, so little is lost) is
//! `[0xFF, hi, lo, rest…]`; the first `~` in `rest` is replaced by enough `x`s to make its line
//! between 1 MiB − 2 KiB and 1 MiB + 2 KiB long, so the size limit and the reader's buffer
//! boundaries are exercised without feeding libFuzzer megabyte inputs.
#![no_main]

use std::borrow::Cow;
use std::io::Read;

use libfuzzer_sys::fuzz_target;
use persyk::session::format::Entry;
use persyk::session::record::{MAX_RECORD_BYTES, parse_record};
use persyk::session::{Code, SessionIndex, scan_bytes, scan_reader};

#[path = "../../tests/session_model/mod.rs"]
mod session_model;

const INFLATE: u8 = 0xFF;

fuzz_target!(|data: &[u8]| {
    let (bytes, big_line) = inflate(data);
    let bytes = &bytes[..];
    let index = scan_bytes(bytes);
    session_model::check_scan_invariants(bytes, &index);

    if let Some((line, len, complete)) = big_line
        && complete
        && index.diagnostics_total() == index.diagnostics().len() as u64
    {
        let too_large = index
            .diagnostics()
            .iter()
            .any(|d| d.line == line && d.code == Code::RecordTooLarge);
        assert_eq!(
            too_large,
            len > MAX_RECORD_BYTES,
            "line {line} of {len} bytes"
        );
    }

    // Line by line: the record parser enforces the size limit on its own.
    let mut lines = bytes.split(|&b| b == b'\n');
    lines.next_back(); // after the last "\n": the uncommitted tail (or empty)
    for line in lines {
        if parse_record(line).is_ok() {
            assert!(
                line.len() <= MAX_RECORD_BYTES,
                "parse_record accepted {} bytes",
                line.len()
            );
        }
    }

    // The streaming reader must not care how reads are split.
    let max_chunk = if bytes.len() > 1 << 16 { 300_000 } else { 17 };
    let chunked = scan_reader(Chunked::new(bytes, max_chunk)).expect("reading memory");
    assert_same_index(&index, &chunked);

    if index.is_authoritative() {
        rewrite_round_trip(bytes, &index);
    }
});

/// An inflated line: 1-based number, length without "\n", and whether a "\n" ends it.
type BigLine = (u64, usize, bool);

/// Applies the 0xFF inflation; returns the bytes to scan and the inflated line, if any.
fn inflate(data: &[u8]) -> (Cow<'_, [u8]>, Option<BigLine>) {
    let (Some(&INFLATE), Some(&hi), Some(&lo)) = (data.first(), data.get(1), data.get(2)) else {
        return (Cow::Borrowed(data), None);
    };
    let rest = &data[3..];
    let Some(at) = rest.iter().position(|&b| b == b'~') else {
        return (Cow::Borrowed(rest), None);
    };
    let target = MAX_RECORD_BYTES - 2048 + usize::from(u16::from_be_bytes([hi, lo]) % 4096);
    let start = rest[..at]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    let end = rest[at..].iter().position(|&b| b == b'\n').map(|p| at + p);
    let line_len = end.unwrap_or(rest.len()) - start - 1; // without the '~'
    let fill = target.saturating_sub(line_len);
    let mut out = Vec::with_capacity(rest.len() + fill);
    out.extend_from_slice(&rest[..at]);
    out.resize(at + fill, b'x');
    out.extend_from_slice(&rest[at + 1..]);
    let line = rest[..start].iter().filter(|&&b| b == b'\n').count() as u64 + 1;
    (
        Cow::Owned(out),
        Some((line, line_len + fill, end.is_some())),
    )
}

/// A reader that hands out its bytes in pseudo-random chunks of 1..=max bytes.
struct Chunked<'a> {
    rest: &'a [u8],
    state: u64,
    max: usize,
}

impl<'a> Chunked<'a> {
    fn new(bytes: &'a [u8], max: usize) -> Chunked<'a> {
        // FNV-1a of a prefix seeds the chunk sizes: deterministic per input.
        let mut state = 0xcbf2_9ce4_8422_2325u64;
        for &b in bytes.iter().take(64) {
            state = (state ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
        Chunked {
            rest: bytes,
            state: state | 1,
            max,
        }
    }
}

impl Read for Chunked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        let want = 1 + (self.state % self.max as u64) as usize;
        let n = want.min(buf.len()).min(self.rest.len());
        buf[..n].copy_from_slice(&self.rest[..n]);
        self.rest = &self.rest[n..];
        Ok(n)
    }
}

fn assert_same_index(a: &SessionIndex, b: &SessionIndex) {
    assert_eq!(a.diagnostics(), b.diagnostics());
    assert_eq!(a.diagnostics_total(), b.diagnostics_total());
    assert_eq!(a.committed_len(), b.committed_len());
    assert_eq!(a.committed_lines(), b.committed_lines());
    assert_eq!(a.tail(), b.tail());
    assert_eq!(a.header(), b.header());
    assert_eq!(a.name(), b.name());
    assert_eq!(a.archived(), b.archived());
    let mut la: Vec<_> = a.labels().collect();
    let mut lb: Vec<_> = b.labels().collect();
    la.sort_unstable();
    lb.sort_unstable();
    assert_eq!(la, lb);
    assert_eq!(a.entries().len(), b.entries().len());
    for (i, (x, y)) in a.entries().iter().zip(b.entries()).enumerate() {
        let pos = i as u32;
        assert_eq!(a.id(pos), b.id(pos));
        assert_eq!(
            (
                x.kind(),
                x.parent(),
                a.line(pos),
                x.offset(),
                x.len_bytes(),
                x.removal_target()
            ),
            (
                y.kind(),
                y.parent(),
                b.line(pos),
                y.offset(),
                y.len_bytes(),
                y.removal_target()
            )
        );
        assert_eq!(a.custom_type(pos), b.custom_type(pos));
    }
}

/// Every entry of an authoritative file parses into the writer types; writing the file back
/// from them gives a file that validates with the same tree and metadata.
fn rewrite_round_trip(bytes: &[u8], index: &SessionIndex) {
    let header_end = bytes.iter().position(|&b| b == b'\n').expect("header line");
    let mut rewritten = bytes[..=header_end].to_vec();
    for (i, e) in index.entries().iter().enumerate() {
        let line = &bytes[e.offset() as usize..e.offset() as usize + e.len_bytes() as usize];
        let text = std::str::from_utf8(line).expect("validated lines are UTF-8");
        let entry = match Entry::from_line(text) {
            Ok(entry) => entry,
            Err(err) => panic!("entry {i} validated but does not parse: {err}"),
        };
        assert_eq!(entry.id, index.id(i as u32));
        assert_eq!(entry.body.type_name(), e.kind().as_str());
        let again = entry.to_line();
        let reparsed = Entry::from_line(&again).expect("writer output parses");
        assert_eq!(reparsed, entry, "round trip of entry {i}");
        rewritten.extend_from_slice(again.as_bytes());
        rewritten.push(b'\n');
    }
    let re = scan_bytes(&rewritten);
    assert!(re.is_valid(), "rewritten file: {:?}", re.diagnostics());
    assert_eq!(re.entries().len(), index.entries().len());
    for (i, (x, y)) in index.entries().iter().zip(re.entries()).enumerate() {
        let pos = i as u32;
        assert_eq!(index.id(pos), re.id(pos));
        assert_eq!(
            (x.kind(), x.parent(), x.removal_target()),
            (y.kind(), y.parent(), y.removal_target())
        );
        assert_eq!(index.custom_type(pos), re.custom_type(pos));
    }
    assert_eq!(index.name(), re.name());
    assert_eq!(index.archived(), re.archived());
    let mut la: Vec<_> = index.labels().collect();
    let mut lb: Vec<_> = re.labels().collect();
    la.sort_unstable();
    lb.sort_unstable();
    assert_eq!(la, lb);
}
