//! Regressions in on-device recognition's guard, model files and downloads (issue #23).
//!
//! The downloads run against the loopback server of tests/model_server; the model-file
//! checks run over the real tiny.en test model (`scripts/fetch-test-model`) and a small whole
//! model built in memory (`model_server::whisper_model`).

#[path = "../model_server/mod.rs"]
mod model_server;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

use model_server::{MODEL_LEN, Serve, model_byte, serve, sha256_of, whisper_model};
use persyk::local::models::{self, CatalogModel, LocalModelChoice, ModelState, ModelStore};
use persyk::local::{Recognition, Verdict, judge};
use sha2::{Digest, Sha256};

fn catalog_of(name: &'static str, bytes: u64, sha256: &'static str) -> &'static CatalogModel {
    Box::leak(Box::new(CatalogModel {
        name,
        bytes,
        sha256,
        description: "a test model",
    }))
}

fn served_model() -> &'static CatalogModel {
    catalog_of(
        "test.en",
        MODEL_LEN as u64,
        sha256_of(MODEL_LEN, model_byte),
    )
}

fn never() -> AtomicBool {
    AtomicBool::new(false)
}

// ---------------------------------------------------------------------------------------------
// Item 4: the no-speech filter.

fn heard(text: &str) -> Verdict {
    judge(&Recognition {
        text: text.into(),
        no_speech_probability: 0.01,
    })
}

/// The guard cut everything from a `(`, `[` or `*` to its partner — or to the end of the
/// text when there was none: "Multiply 5 * 3 and send it to Anna." became "Multiply 5", and
/// "The meeting (the one on Friday) is moved…" lost its parenthetical. Only whole
/// annotations (`[BLANK_AUDIO]`, `(music)`, `*laughs*`) may go; words someone said never.
#[test]
fn issue23_04_the_no_speech_filter_removes_only_whole_annotations() {
    for said in [
        "Multiply 5 * 3 and send it to Anna.",
        "The meeting (the one on Friday) is moved to Monday.",
        "Put the total in [brackets] at the end.",
        "Use *bold* for the title and * for footnotes.",
        "Half of it (50 %) or more (if we can",
        "Press [Enter] twice.",
    ] {
        assert_eq!(heard(said), Verdict::Text(said.into()), "{said:?}");
    }
    for (said, kept) in [
        ("Call me (laughs) tomorrow.", "Call me tomorrow."),
        ("[BLANK_AUDIO] Hello there.", "Hello there."),
        ("So *clears throat* as I said.", "So as I said."),
        ("Okay [Music] let's go.", "Okay let's go."),
        ("(upbeat music) Welcome back.", "Welcome back."),
    ] {
        assert_eq!(heard(said), Verdict::Text(kept.into()), "{said:?}");
    }
    for blank in [
        "[BLANK_AUDIO]",
        "(music)",
        "[Music]",
        "*laughs*",
        "[ Silence ]",
        "(soft music playing)",
        "[_TT_150]",
        "(audience laughing) [applause]",
    ] {
        assert_eq!(heard(blank), Verdict::NoSpeech, "{blank:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Item 6: damaged model files.

/// Where the fields of the real model lie (parsed here, independently of the checker).
#[cfg(feature = "local")]
struct Layout {
    len: u64,
    /// Offsets of the header's `ftype`, the filters and the vocabulary.
    ftype_at: u64,
    vocab_at: u64,
    /// Per tensor: the offset of its header (`n_dims`, then `name_len`, then `ttype`) and of
    /// its data.
    tensors: Vec<(u64, u64)>,
}

#[cfg(feature = "local")]
impl Layout {
    fn parse(bytes: &[u8]) -> Layout {
        let i32_at = |at: usize| i32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        let ftype_at = 4 + 10 * 4;
        let filters_at = ftype_at + 4;
        let (n_mel, n_fft) = (i32_at(filters_at), i32_at(filters_at + 4));
        let vocab_at = filters_at + 8 + (n_mel * n_fft * 4) as usize;
        let mut at = vocab_at + 4;
        for _ in 0..i32_at(vocab_at) {
            at += 4 + i32_at(at) as usize;
        }
        let mut tensors = Vec::new();
        while at < bytes.len() {
            let (n_dims, name_len, ttype) = (i32_at(at), i32_at(at + 4), i32_at(at + 8));
            let dims: Vec<usize> = (0..n_dims as usize)
                .map(|d| i32_at(at + 12 + 4 * d) as usize)
                .collect();
            let data = at + 12 + 4 * n_dims as usize + name_len as usize;
            let size = match ttype {
                0 => 4,
                1 => 2,
                other => panic!("the test model has only f32/f16 tensors, not {other}"),
            };
            tensors.push((at as u64, data as u64));
            at = data + dims.iter().product::<usize>() * size;
        }
        assert_eq!(at, bytes.len(), "the test model parses to its end");
        Layout {
            len: bytes.len() as u64,
            ftype_at: ftype_at as u64,
            vocab_at: vocab_at as u64,
            tensors,
        }
    }
}

/// A small deterministic generator (xorshift) for the cases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    #[cfg(feature = "local")]
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A model file that starts with `ggml` and is truncated, has a bad type field or holds
/// random bytes aborted the whole process inside whisper.cpp (`std::out_of_range`,
/// `GGML_ASSERT`, exit 134) — in the app on the first hotkey press. Only the magic was
/// checked. Now the whole structure is checked first; over the real tiny.en model cut at
/// many points, with type, dimension and name fields flipped, and with random bytes after
/// the magic, every file is refused by name and none reaches whisper.cpp (the test process
/// survives every `LocalModel::load`).
#[cfg(feature = "local")]
#[test]
fn issue23_06_a_damaged_model_file_is_refused_by_name_and_never_aborts() {
    use std::os::unix::fs::FileExt;

    use persyk::local::whisper::LocalModel;

    // The tiny.en test model (tests/support's `test_model`; that module belongs to the
    // realtime part of this binary).
    let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-model/ggml-tiny.en.bin");
    assert!(
        real.exists(),
        "the test model is missing: run scripts/fetch-test-model (scripts/setup does)"
    );
    let original = std::fs::read(&real).expect("the test model");
    let layout = Layout::parse(&original);
    let dir = tempfile::tempdir().unwrap();
    let store = ModelStore::new(dir.path().join("models"));
    let path = dir.path().join("ggml-damaged.bin");
    std::fs::write(&path, &original).unwrap();
    let mut cases = 0usize;
    let mut refused = |what: &str| {
        cases += 1;
        // Never an abort: the engine itself refuses it with a code…
        let err = LocalModel::load(&path).expect_err(what);
        assert_eq!(err.code(), "local.model-invalid", "{what}: {err}");
        // …and so do the check and the models folder, before whisper.cpp is involved.
        let err = persyk::local::check_model_file(&path).expect_err(what);
        assert_eq!(err.code(), "local.model-invalid", "{what}: {err}");
        if cases.is_multiple_of(4) {
            let err = store
                .resolve(&LocalModelChoice::File(path.clone()))
                .expect_err(what);
            assert_eq!(err.code(), "models.invalid-file", "{what}: {err}");
        }
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let poke = |at: u64, value: i32| file.write_all_at(&value.to_le_bytes(), at).unwrap();
    let restore = |at: u64| {
        let at_usize = at as usize;
        file.write_all_at(&original[at_usize..at_usize + 4], at)
            .unwrap()
    };
    let mut rng = Rng(0x2323_0606);

    // Flipped type fields: the header's file type, then each sampled tensor's type,
    // dimension count and name length.
    for ftype in [
        -1,
        4,
        5,
        6,
        15,
        24,
        25,
        99,
        1_004,
        40_000,
        i32::MAX,
        i32::MIN,
    ] {
        poke(layout.ftype_at, ftype);
        refused(&format!("ftype {ftype}"));
    }
    restore(layout.ftype_at);
    let odd_types = [
        -1,
        0,
        1,
        4,
        5,
        8,
        9,
        15,
        16,
        24,
        30,
        39,
        40,
        1_000,
        i32::MAX,
    ];
    let odd_dims = [0, -1, 5, 6, 64, i32::MAX, i32::MIN];
    let odd_names = [0, -1, -4_096, 1 << 20, i32::MAX];
    for (n, &(header, _)) in layout.tensors.iter().enumerate().step_by(9) {
        let original_type = i32::from_le_bytes(
            original[header as usize + 8..header as usize + 12]
                .try_into()
                .unwrap(),
        );
        let ttype = loop {
            let t = odd_types[rng.below(odd_types.len() as u64) as usize];
            if t != original_type {
                break t;
            }
        };
        poke(header + 8, ttype);
        refused(&format!("tensor {n}: type {ttype}"));
        restore(header + 8);
        let n_dims = odd_dims[rng.below(odd_dims.len() as u64) as usize];
        poke(header, n_dims);
        refused(&format!("tensor {n}: {n_dims} dimensions"));
        restore(header);
        let name_len = odd_names[rng.below(odd_names.len() as u64) as usize];
        poke(header + 4, name_len);
        refused(&format!("tensor {n}: name length {name_len}"));
        restore(header + 4);
    }
    // The first dimension of a tensor made larger: its data would run on into the next.
    let (header, _) = layout.tensors[layout.tensors.len() / 2];
    let ne0 = i32::from_le_bytes(
        original[header as usize + 12..header as usize + 16]
            .try_into()
            .unwrap(),
    );
    poke(header + 12, ne0 + 1);
    refused("a tensor one element longer");
    restore(header + 12);
    persyk::local::check_model_file(&path).expect("restored to the real model");

    // Random bytes after the magic, short and as long as the model.
    for (seed, len) in [
        (1u64, 64u64),
        (2, 4_096),
        (3, 1 << 20),
        (4, layout.len),
        (5, layout.len + 12),
    ] {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut bytes = original[..4].to_vec();
        while (bytes.len() as u64) < len {
            bytes.extend_from_slice(&rng.next().to_le_bytes());
        }
        bytes.truncate(len as usize);
        std::fs::write(&path, &bytes).unwrap();
        refused(&format!("{len} bytes, random after the magic"));
    }

    // Truncated at many points, from the end of the file to its start.
    std::fs::write(&path, &original).unwrap();
    let mut cuts = vec![
        0,
        3,
        4,
        8,
        layout.ftype_at,
        layout.ftype_at + 6,
        layout.vocab_at,
        layout.vocab_at + 2,
        layout.vocab_at + 4_000,
        layout.len - 1,
        layout.len - 4,
    ];
    for &(header, data) in layout.tensors.iter().step_by(8) {
        cuts.extend([header, header + 2, header + 12, data - 1, data + 1]);
    }
    for _ in 0..20 {
        cuts.push(rng.below(layout.len));
    }
    // Cutting at a tensor's start leaves a whole file of fewer tensors: still refused
    // (whisper.cpp needs every tensor), so every cut is a case.
    cuts.sort_unstable();
    cuts.dedup();
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    for &cut in cuts.iter().rev() {
        file.set_len(cut).unwrap();
        refused(&format!("cut at byte {cut} of {}", layout.len));
    }
    drop(file);

    // The real model itself still loads.
    std::fs::write(&path, &original).unwrap();
    assert!(persyk::local::check_model_file(&path).is_ok());
    LocalModel::load(&path).expect("the real model loads");
    eprintln!("{cases} damaged files refused");
}

// ---------------------------------------------------------------------------------------------
// Item 7: catalog models are verified before use.

fn sha256_hex(bytes: &[u8]) -> &'static str {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Box::leak(hex.into_boxed_str())
}

/// The SHA-256 was checked only while downloading: a file of the catalog's size at a
/// model's name was "downloaded and verified" whatever it held, and a model with flipped
/// bytes was used (and saved "vast vast vast …" as the user's words). Now a catalog model
/// is hashed before its first use and again whenever the file changed; a mismatch is
/// `models.damaged` and never resolved for loading.
#[test]
fn issue23_07_a_catalog_model_that_fails_its_hash_is_never_used() {
    let good = whisper_model(7);
    let planted = whisper_model(8);
    assert_eq!(good.len(), planted.len());
    let model = catalog_of("small-test", good.len() as u64, sha256_hex(&good));
    let catalog: &'static [CatalogModel] = Box::leak(Box::new([*model]));
    let dir = tempfile::tempdir().unwrap();
    let store = ModelStore::new(dir.path().to_path_buf()).with_catalog(catalog);
    let choice = LocalModelChoice::Catalog("small-test".into());

    // A whole, loadable-looking model of the right size that is not the catalog's file.
    std::fs::write(store.path("small-test"), &planted).unwrap();
    assert!(matches!(store.state(model), ModelState::Damaged { .. }));
    assert_eq!(store.resolve(&choice).unwrap_err().code(), "models.damaged");
    assert!(matches!(store.list()[0].state, ModelState::Damaged { .. }));

    // The catalog's file is used…
    std::fs::write(store.path("small-test"), &good).unwrap();
    assert_eq!(store.state(model), ModelState::Installed);
    assert_eq!(store.resolve(&choice).unwrap(), store.path("small-test"));

    // …until 200 of its bytes change in place (same size, same name, same inode).
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(store.path("small-test"))
            .unwrap();
        let flipped: Vec<u8> = good[10_000..10_200].iter().map(|b| !b).collect();
        f.write_all_at(&flipped, 10_000).unwrap();
        // A later modification time, as any write after the verification would leave
        // (file systems with a coarse clock may not have moved it yet).
        f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(2))
            .unwrap();
    }
    assert_eq!(store.resolve(&choice).unwrap_err().code(), "models.damaged");
}

/// The CLI said "downloaded" for a random file of tiny.en's size at tiny.en's name.
#[test]
fn issue23_07_persyk_models_list_does_not_call_a_random_file_downloaded() {
    let tiny = models::find("tiny.en").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x7777);
    let random: Vec<u8> = (0..tiny.bytes).map(|_| rng.next() as u8).collect();
    std::fs::write(dir.path().join("ggml-tiny.en.bin"), random).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_persyk"))
        .args(["models", "list"])
        .env(models::MODELS_DIR_ENV, dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("tiny.en "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(!line.contains("downloaded"), "{line}");
    assert!(line.contains("damaged"), "{line}");
}

// ---------------------------------------------------------------------------------------------
// Item 8: the download's part, free space, no network, and the lock.

/// The download opened its `.part` following symlinks: a link planted there to another
/// file made the download append 77 MB to that file and make it 0600. Now the part is
/// opened `O_NOFOLLOW`: the link is refused by name, the file it points to keeps its content
/// and mode, and deleting the model removes the link only.
#[test]
fn issue23_08_a_symlink_at_the_part_path_is_never_followed() {
    let server = serve(MODEL_LEN, model_byte, vec![Serve::Full]);
    let dir = tempfile::tempdir().unwrap();
    let store = ModelStore::new(dir.path().join("models"))
        .with_base_url(&server.url())
        .unwrap();
    std::fs::create_dir_all(store.dir()).unwrap();
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, b"the victim's own words\n").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
    let part = store.dir().join("ggml-test.en.bin.part");
    std::os::unix::fs::symlink(&victim, &part).unwrap();
    let model = served_model();

    let err = store.download(model, &never(), &mut |_| {}).unwrap_err();
    assert_eq!(err.code(), "models.part-not-a-file", "{err}");
    let victim_unchanged = |victim: &Path| {
        assert_eq!(
            std::fs::read(victim).unwrap(),
            b"the victim's own words\n".to_vec()
        );
        let mode = std::fs::metadata(victim).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
    };
    victim_unchanged(&victim);
    assert!(server.ranges().is_empty(), "nothing was asked");
    assert!(!store.path("test.en").exists());

    // Deleting removes the link, not what it points to; then the download works.
    assert!(store.delete("test.en").unwrap());
    assert!(std::fs::symlink_metadata(&part).is_err());
    victim_unchanged(&victim);
    store.download(model, &never(), &mut |_| {}).unwrap();
    victim_unchanged(&victim);
}

/// A download started whatever the free space, filled the disk and broke the next
/// recording. Now it first checks that the disk has what is left to fetch plus a margin, and
/// says how much it needs.
#[test]
fn issue23_08_a_download_without_room_for_the_model_does_not_start() {
    let server = serve(MODEL_LEN, model_byte, vec![Serve::Full]);
    let dir = tempfile::tempdir().unwrap();
    let store = ModelStore::new(dir.path().join("models"))
        .with_base_url(&server.url())
        .unwrap();
    // A model of 1 PiB: no test machine has room for it.
    let huge = catalog_of("huge.en", 1 << 50, sha256_of(MODEL_LEN, model_byte));
    let err = store.download(huge, &never(), &mut |_| {}).unwrap_err();
    assert_eq!(err.code(), "models.no-space", "{err}");
    // It says how much it needs: at least the model (2^30 MiB).
    let message = err.to_string();
    let needed_mib: u64 = message
        .split_once("needs ")
        .and_then(|(_, rest)| rest.split_once(" MiB"))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no amount in {message:?}"));
    assert!(needed_mib > 1 << 30, "{message}");
    assert!(server.ranges().is_empty(), "nothing was asked");
    assert!(!store.dir().join("ggml-huge.en.bin.part").exists());
}

/// A download that never reached the server said "the download was interrupted"
/// (`models.network`), as if a connection had dropped. Now it says there is no network
/// connection, with its own code; a connection that drops stays `models.network`.
#[test]
fn issue23_08_a_download_that_never_connected_says_no_network_connection() {
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let store = ModelStore::new(dir.path().join("models"))
        .with_base_url(&format!("http://{closed}/models"))
        .unwrap();
    let err = store
        .download(served_model(), &never(), &mut |_| {})
        .unwrap_err();
    assert_eq!(err.code(), "models.offline", "{err}");
    assert!(err.to_string().contains("no network connection"), "{err}");
    assert!(err.is_resumable());

    let server = serve(MODEL_LEN, model_byte, vec![Serve::CutAfter(100_000)]);
    let store = ModelStore::new(dir.path().join("other"))
        .with_base_url(&server.url())
        .unwrap();
    let err = store
        .download(served_model(), &never(), &mut |_| {})
        .unwrap_err();
    assert_eq!(err.code(), "models.network", "{err}");
}

/// `tests/models.rs::cancel_keeps_the_part_and_the_next_download_finishes_it` failed once
/// in CI with `resume: Busy`. The cause: the part's lock is an `flock`, which belongs to the
/// open file description, and the download released it only by closing its descriptor. A
/// child process that another thread forked meanwhile (the CLI tests spawn `persyk`) holds a
/// copy of every descriptor until its `exec` closes them, so the lock outlived the
/// cancelled download. Here a child is forked while the part is open and waits before its
/// `exec`; the resumed download must find the part free at once.
#[test]
fn issue23_08_a_cancelled_download_releases_its_lock_even_if_a_child_inherited_it() {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;

    let server = serve(MODEL_LEN, model_byte, vec![Serve::Full]);
    let dir = tempfile::tempdir().unwrap();
    let store = ModelStore::new(dir.path().join("models"))
        .with_base_url(&server.url())
        .unwrap();
    let model = served_model();
    let cancel = AtomicBool::new(false);
    let (mut forked, forked_tx) = std::io::pipe().unwrap();
    let mut spawner = None;
    let err = store
        .download(model, &cancel, &mut |p| {
            if p.done_bytes < 1_000_000 || spawner.is_some() {
                return;
            }
            let tx = forked_tx.as_raw_fd();
            // Another thread starts a program; its child holds every descriptor of this
            // process (the part's included) for 2 s before its exec.
            spawner = Some(std::thread::spawn(move || {
                let mut c = Command::new("true");
                // SAFETY: the closure only calls write(2) and nanosleep(2), both
                // async-signal-safe, between fork and exec.
                unsafe {
                    c.pre_exec(move || {
                        libc::write(tx, b"f".as_ptr().cast(), 1);
                        std::thread::sleep(std::time::Duration::from_secs(2));
                        Ok(())
                    });
                }
                c.status()
            }));
            let mut byte = [0u8; 1];
            forked.read_exact(&mut byte).unwrap();
            cancel.store(true, Ordering::SeqCst);
        })
        .unwrap_err();
    assert_eq!(err.code(), "models.cancelled");
    // At once, while the child still holds its copy of the part's descriptor.
    let resumed = store.download(model, &never(), &mut |_| {});
    let child = spawner.expect("a child was forked").join().unwrap();
    assert!(child.unwrap().success());
    resumed.expect("the resumed download finds the part free");
    assert_eq!(store.state(model), ModelState::Installed);
}
