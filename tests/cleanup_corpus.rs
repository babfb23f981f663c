//! The clean-up guard over the labelled corpus (`tests/cleanup_corpus/pairs.jsonl`, issue
//! #35): every (spoken, output, mode) pair a person labelled faithful or not. The targets are
//! properties of the whole corpus, per mode:
//! - **no meaning change accepted** in any mode (an unfaithful pair that passes fails the
//!   test and is named);
//! - **≥ 95 % of faithful Tidy outputs accepted**, **≥ 90 % of faithful Polish, Email and
//!   My instruction outputs** (the guard may refuse a faithful output: the spoken words are
//!   pasted instead, which loses nothing).
//!
//! The per-category figures are printed (`cargo test --test cleanup_corpus -- --nocapture`)
//! and recorded in `docs/verification.md`.

use std::collections::BTreeMap;

use persyk::cleanup::guard::{self, Strictness};
use serde_json::Value;

fn corpus() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/cleanup_corpus/pairs.jsonl"
    );
    let text = std::fs::read_to_string(path).expect("the corpus");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("a corpus line"))
        .collect()
}

fn strictness(mode: &str) -> Strictness {
    match mode {
        "tidy" => Strictness::Strict,
        "polish" | "email" | "custom" => Strictness::Rewrite,
        "translate" => Strictness::Translate,
        other => panic!("unknown mode {other}"),
    }
}

fn field<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str().unwrap_or_else(|| panic!("corpus field {k}"))
}

#[derive(Default)]
struct Tally {
    faithful: usize,
    faithful_accepted: usize,
    changed: usize,
    changed_accepted: usize,
}

#[test]
fn issue35_the_guard_meets_its_targets_on_the_labelled_corpus() {
    let pairs = corpus();
    assert!(pairs.len() >= 300, "the corpus has {} pairs", pairs.len());
    let mut by_mode: BTreeMap<String, Tally> = BTreeMap::new();
    let mut by_category: BTreeMap<(String, bool), (usize, usize)> = BTreeMap::new();
    let mut accepted_changes = Vec::new();
    let mut refused_faithful = Vec::new();
    for p in &pairs {
        let mode = field(p, "mode");
        let faithful = p["faithful"].as_bool().expect("faithful");
        let (_, verdict) = guard::check(field(p, "spoken"), field(p, "output"), strictness(mode));
        let accepted = verdict.is_ok();
        let group = match mode {
            "polish" | "email" | "custom" => "rewrite",
            m => m,
        };
        let t = by_mode.entry(group.to_owned()).or_default();
        let c = by_category
            .entry((field(p, "category").to_owned(), faithful))
            .or_default();
        c.0 += 1;
        if faithful {
            t.faithful += 1;
            if accepted {
                t.faithful_accepted += 1;
                c.1 += 1;
            } else {
                refused_faithful.push(format!(
                    "{} {} {}: {}",
                    field(p, "id"),
                    mode,
                    field(p, "category"),
                    verdict.err().map_or("", |r| r.code())
                ));
            }
        } else {
            t.changed += 1;
            if accepted {
                t.changed_accepted += 1;
                c.1 += 1;
                accepted_changes.push(format!(
                    "{} {} {}",
                    field(p, "id"),
                    mode,
                    field(p, "category")
                ));
            }
        }
    }
    println!("mode       faithful accepted      changed accepted");
    for (mode, t) in &by_mode {
        println!(
            "{mode:<10} {:>3}/{:<3} {:>6.1} %    {:>3}/{:<3} {:>5.1} %",
            t.faithful_accepted,
            t.faithful,
            100.0 * t.faithful_accepted as f64 / t.faithful.max(1) as f64,
            t.changed_accepted,
            t.changed,
            100.0 * t.changed_accepted as f64 / t.changed.max(1) as f64
        );
    }
    println!("\ncategory                 labelled   pairs  accepted");
    for ((category, faithful), (n, ok)) in &by_category {
        let label = if *faithful { "faithful" } else { "changed" };
        println!("{category:<24} {label:<9} {n:>5} {ok:>9}");
    }
    println!("\nfaithful outputs refused:");
    for r in &refused_faithful {
        println!("  {r}");
    }
    assert!(
        accepted_changes.is_empty(),
        "meaning changes accepted: {accepted_changes:#?}"
    );
    let rate = |mode: &str| {
        by_mode.get(mode).map_or(1.0, |t| {
            t.faithful_accepted as f64 / t.faithful.max(1) as f64
        })
    };
    assert!(
        rate("tidy") >= 0.95,
        "faithful Tidy accepted: {:.3}",
        rate("tidy")
    );
    assert!(
        rate("rewrite") >= 0.90,
        "faithful rewrites accepted: {:.3}",
        rate("rewrite")
    );
}
