//! Regressions in the desktop app (`src/app/`, `src/credentials.rs`).
#![cfg(feature = "app")]

#[path = "../app_support/mod.rs"]
mod app_support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use app_support::shell::StateTray;
use app_support::ui::UiApp;
use app_support::x11::{in_xvfb_child, press};
use app_support::{MemKeys, Recorded, ToneMic, fixture, one_utterance, scenario};
use eframe::egui::accesskit::Role;
use eframe::egui::{ViewportCommand, ViewportId};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use persyk::app::backend::{BackendConfig, BackendHandle, Microphone};
use persyk::app::effects::Effects;
use persyk::app::event::TrayState;
use persyk::app::event::{MenuAction, Post, ShellEvent};
use persyk::app::model::Waker;
use persyk::app::permission::{Access, MicrophonePermission, PRIVACY_MICROPHONE_URL};
use persyk::app::shell::{Shell, ShellOptions, TrayPort};
use persyk::app::ui::{Page, PersykUi};
use persyk::capture::source::AudioSource;
use persyk::pipeline::SourceKind;
use persyk::settings::Settings;

/// A guard against hangs only (never a performance threshold).
const WAIT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------------
// Helpers: a shell in a headless harness, an Xvfb display, a microphone that never opens.

type Syncs = app_support::shell::TraySyncs;

struct ShellApp {
    harness: Harness<'static, Shell>,
    post: Post,
    syncs: Syncs,
}

fn shell_app(ui: PersykUi, no_hotkey: bool) -> ShellApp {
    let syncs: Syncs = Arc::default();
    let tray_syncs = syncs.clone();
    let harness = app_support::shell::shell_harness(
        ui,
        ShellOptions {
            hidden: false,
            no_hotkey,
            ..ShellOptions::default()
        },
        move |_post| Ok(Box::new(StateTray(tray_syncs)) as Box<dyn TrayPort>),
    );
    let post = harness.state().poster();
    ShellApp {
        harness,
        post,
        syncs,
    }
}

impl ShellApp {
    fn wait_until(&mut self, what: &str, done: impl Fn(&ShellApp) -> bool) {
        let start = Instant::now();
        loop {
            self.harness.step();
            if done(self) {
                return;
            }
            assert!(
                start.elapsed() < WAIT,
                "timed out waiting for {what}; tray saw {:?}; hotkey note {:?}",
                self.syncs.lock().unwrap(),
                self.harness.state().view().hotkey_note
            );
            std::thread::sleep(Duration::from_millis(15));
        }
    }

    fn has_label(&self, text: &str) -> bool {
        self.harness
            .query_all_by_label_contains(text)
            .next()
            .is_some()
    }

    fn last_sync(&self) -> Option<TrayState> {
        self.syncs.lock().unwrap().last().copied()
    }

    fn commands(&self) -> Vec<ViewportCommand> {
        self.harness
            .output()
            .viewport_output
            .get(&ViewportId::ROOT)
            .map(|v| v.commands.clone())
            .unwrap_or_default()
    }

    fn click(&mut self, label: &str) {
        self.harness
            .get_by_role_and_label(Role::Button, label)
            .click();
        self.harness.step();
        self.harness.step();
    }

    fn type_into(&mut self, label: &str, text: &str) {
        self.harness.get_by_label(label).focus();
        self.harness.step();
        self.harness
            .key_press_modifiers(eframe::egui::Modifiers::COMMAND, eframe::egui::Key::A);
        self.harness.get_by_label(label).type_text(text);
        self.harness.step();
    }

    /// Saves the Settings page as it stands and waits until the shell has applied it.
    fn save_settings(&mut self) {
        (self.post)(ShellEvent::Menu(MenuAction::Settings));
        self.harness.step();
        let before = self.harness.state().view().settings_generation();
        self.click("Save settings");
        self.wait_until("the settings to be saved", |a| {
            a.harness.state().view().settings_generation() > before
        });
        // One more frame: the shell re-registers the hotkey in `tick`.
        self.harness.step();
    }
}

// ---------------------------------------------------------------------------------------------
// Issue #11.

/// Issue #11 item 3: `GlobalHotKeyEvent::set_event_handler` keeps only its first handler, so
/// after Save registered a new combination every event was dropped; and saving an unchanged
/// combination collided with its own earlier grab (`hotkey.unavailable`), leaving no hotkey.
/// Through the real X11 hotkey: save unchanged → the hotkey still works; change it → the new
/// keys start a recording and the old keys do nothing; a taken combination is said in
/// Settings.
#[test]
fn issue11_03_a_changed_hotkey_works_without_a_restart() {
    if !in_xvfb_child("app::issue11_03_a_changed_hotkey_works_without_a_restart") {
        return;
    }
    // Two recordings, so two scripted connections.
    let conn = r#"{"utterances": [{"end_ms": 400, "transcript": "Said with the hotkey.",
        "delay_ms": 50}], "close_after_commit_ms": 200}"#;
    let two = scenario(&format!(
        r#"{{"name": "hotkey", "connections": [{conn}, {conn}]}}"#
    ));
    let f = fixture(Some(two), Some("sk-test"), 30.0, |_| {});
    let mut app = shell_app(f.ui, false);
    app.harness.step();
    assert_eq!(app.harness.state().view().hotkey_note, None);

    // Save with the hotkey unchanged (what a first-run user does after pasting the key).
    app.save_settings();
    assert_eq!(app.harness.state().view().hotkey_note, None);
    press("alt+space");
    app.wait_until("Alt+Space to start a recording", |a| {
        a.harness.state().view().is_recording()
    });
    app.wait_until("the recording to stream", |a| {
        a.last_sync() == Some(TrayState::Recording)
    });
    press("alt+space");
    app.wait_until("Alt+Space to stop it", |a| {
        !a.harness.state().view().is_recording()
    });

    // Change it.
    app.type_into("Global hotkey", "Ctrl+Shift+D");
    app.save_settings();
    assert_eq!(app.harness.state().view().hotkey_note, None);
    assert_eq!(
        app.harness.state().view().settings().hotkey.keys.as_deref(),
        Some("Ctrl+Shift+D")
    );
    // The old keys first, then the new: X delivers them in this order, so if the old keys
    // still toggled, the new keys' toggle would stop that recording before it streamed.
    press("alt+space");
    press("ctrl+shift+d");
    app.wait_until("Ctrl+Shift+D to start a recording", |a| {
        a.harness.state().view().is_recording()
    });
    let start = Instant::now();
    loop {
        app.harness.step();
        let view = app.harness.state().view();
        assert!(
            view.is_recording(),
            "the recording stopped by itself: the old Alt+Space still toggled"
        );
        if app.last_sync() == Some(TrayState::Recording) {
            break;
        }
        assert!(start.elapsed() < WAIT, "timed out waiting for streaming");
        std::thread::sleep(Duration::from_millis(15));
    }
    press("ctrl+shift+d");
    app.wait_until("Ctrl+Shift+D to stop it", |a| {
        !a.harness.state().view().is_recording()
    });

    // A combination another client holds: said in Settings, nothing registered.
    let other = global_hotkey::GlobalHotKeyManager::new().expect("a second hotkey client");
    let taken: global_hotkey::hotkey::HotKey = "Ctrl+Alt+K".parse().unwrap();
    other
        .register(taken)
        .expect("the other client grabs Ctrl+Alt+K");
    app.type_into("Global hotkey", "Ctrl+Alt+K");
    app.save_settings();
    let note = app.harness.state().view().hotkey_note.clone();
    assert!(
        note.as_deref().is_some_and(|n| n.contains("hotkey.taken")),
        "{note:?}"
    );
    assert!(app.has_label("The global hotkey is not active"));
    other.unregister(taken).unwrap();
}

/// A microphone whose `open` blocks until the test lets go: a recording that never starts
/// and so never finishes.
struct StuckMic {
    entered: SyncSender<()>,
    release: Mutex<Receiver<()>>,
    released: Arc<AtomicBool>,
}

impl Microphone for StuckMic {
    fn open(
        &self,
        _device: Option<&str>,
        _pre_roll_ms: u32,
    ) -> Result<(Box<dyn AudioSource>, SourceKind), String> {
        let _ = self.entered.try_send(());
        let _ = self.release.lock().unwrap().recv();
        self.released.store(true, Ordering::SeqCst);
        Err("capture.no-device".into())
    }
}

struct Stuck {
    ui: PersykUi,
    entered: Receiver<()>,
    release: SyncSender<()>,
    released: Arc<AtomicBool>,
    _dir: tempfile::TempDir,
}

fn stuck_backend() -> Stuck {
    let dir = tempfile::tempdir().unwrap();
    let (entered_tx, entered) = sync_channel(1);
    let (release, release_rx) = sync_channel(1);
    let released = Arc::new(AtomicBool::new(false));
    let mut settings = Settings::default();
    settings.sessions.directory = Some(dir.path().join("sessions"));
    let waker = Waker::new();
    let backend = BackendHandle::spawn(
        BackendConfig {
            settings_path: None,
            dev: true,
            microphone: Arc::new(StuckMic {
                entered: entered_tx,
                release: Mutex::new(release_rx),
                released: released.clone(),
            }),
            keys: Arc::new(MemKeys::with(Some("sk-test"))),
            replay_factor: 0.0,
            frontmost: persyk::app::frontmost::unknown(),
            updates: persyk::app::backend::UpdateConfig::off(),
        },
        settings.clone(),
        waker.clone(),
    )
    .unwrap();
    let ui = PersykUi::new(
        backend,
        Box::new(Recorded::default()),
        waker,
        settings,
        true,
    );
    Stuck {
        ui,
        entered,
        release,
        released,
        _dir: dir,
    }
}

/// Issue #16 item 12 (UI part): quitting blocked the UI thread for up to 30 s in
/// `shutdown`, then `Drop` waited another 30 s. Now quitting never blocks the UI: the
/// window paints "Finishing…" and closes once the one deadline has passed, and nothing waits
/// again afterwards.
#[test]
fn issue16_12_quitting_waits_one_deadline_and_keeps_painting() {
    let Stuck {
        ui,
        entered,
        release,
        released,
        _dir,
    } = stuck_backend();
    let mut app = shell_app(ui, true);
    app.harness
        .state_mut()
        .set_quit_deadline(Duration::from_millis(300));
    app.harness.step();
    (app.post)(ShellEvent::TrayClick);
    app.harness.step();
    entered
        .recv_timeout(WAIT)
        .expect("the recording is starting");

    (app.post)(ShellEvent::Menu(MenuAction::Quit));
    app.harness.step();
    // The frame that handled Quit returned at once: it paints "Finishing…" and has not
    // closed the window, although the backend is still stuck.
    assert!(app.harness.state().is_quitting());
    assert!(app.has_label("Finishing…"), "the window shows Finishing…");
    assert!(!app.harness.state().is_closing());
    assert!(!app.commands().contains(&ViewportCommand::Close));
    assert!(!released.load(Ordering::SeqCst));
    // Later frames keep painting until the deadline has passed, then close.
    app.wait_until("the window to close", |a| a.harness.state().is_closing());
    assert!(
        !released.load(Ordering::SeqCst),
        "closed by the deadline, the recording is still stuck"
    );
    // eframe's `on_exit` and the handle's `Drop` must not wait again: with the backend still
    // stuck, a second wait would last until the watchdog below lets the microphone go.
    let watchdog = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(20));
        let _ = release.send(());
    });
    eframe::App::on_exit(app.harness.state_mut());
    drop(app);
    assert!(
        !released.load(Ordering::SeqCst),
        "on_exit or Drop waited again for the stuck backend after the deadline had passed"
    );
    drop(watchdog);
}

/// The same rule one level down: a timed-out `BackendHandle::shutdown` is final, `Drop`
/// does not wait another 30 s.
#[test]
fn issue16_12_backend_shutdown_has_one_deadline() {
    let Stuck {
        mut ui,
        entered,
        release,
        released,
        _dir,
    } = stuck_backend();
    ui.start();
    entered
        .recv_timeout(WAIT)
        .expect("the recording is starting");
    assert!(
        !ui.shutdown(Duration::from_millis(200)),
        "the backend is stuck"
    );
    let watchdog = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(20));
        let _ = release.send(());
    });
    drop(ui);
    assert!(
        !released.load(Ordering::SeqCst),
        "Drop waited again for the stuck backend after shutdown had timed out"
    );
    drop(watchdog);
}

// ---------------------------------------------------------------------------------------------
// Microphone permission (issue #11 item 1).

type Answer = Box<dyn FnOnce(bool) + Send>;

/// A permission the test answers by hand, like a user reading the system prompt.
struct ManualPermission {
    status: Mutex<Access>,
    pending: Mutex<Option<Answer>>,
}

impl MicrophonePermission for ManualPermission {
    fn status(&self) -> Access {
        *self.status.lock().unwrap()
    }
    fn request(&self, answer: Answer) {
        *self.pending.lock().unwrap() = Some(answer);
    }
}

impl ManualPermission {
    fn answer(&self, granted: bool) {
        // The window may say it waits a moment before the backend's request reaches the
        // permission: wait (bounded) for the question like a user waits for the prompt.
        let start = Instant::now();
        let f = loop {
            if let Some(f) = self.pending.lock().unwrap().take() {
                break f;
            }
            assert!(start.elapsed() < WAIT, "a question was asked");
            std::thread::sleep(Duration::from_millis(5));
        };
        *self.status.lock().unwrap() = if granted {
            Access::Granted
        } else {
            Access::Denied
        };
        f(granted);
    }
}

/// The tone microphone behind a permission; remembers whether the input was opened.
struct PermittedMic {
    permission: Arc<ManualPermission>,
    opened: Arc<AtomicBool>,
}

impl Microphone for PermittedMic {
    fn permission(&self) -> Option<Arc<dyn MicrophonePermission>> {
        Some(self.permission.clone())
    }
    fn open(
        &self,
        device: Option<&str>,
        pre_roll_ms: u32,
    ) -> Result<(Box<dyn AudioSource>, SourceKind), String> {
        self.opened.store(true, Ordering::SeqCst);
        ToneMic { seconds: 30.0 }.open(device, pre_roll_ms)
    }
}

/// Effects that record the URLs opened.
#[derive(Default, Clone)]
struct UrlEffects(Arc<Mutex<Vec<String>>>);

impl Effects for UrlEffects {
    fn copy(&mut self, _text: &str) -> Result<(), String> {
        Ok(())
    }
    fn notify(&mut self, _title: &str, _body: &str) {}
    fn open_url(&mut self, url: &str) -> Result<(), String> {
        self.0.lock().unwrap().push(url.to_owned());
        Ok(())
    }
}

struct MicApp {
    harness: Harness<'static, PersykUi>,
    permission: Arc<ManualPermission>,
    opened: Arc<AtomicBool>,
    urls: UrlEffects,
    root: std::path::PathBuf,
    _dir: tempfile::TempDir,
    _fake: (tokio::runtime::Runtime, persyk::realtime::fake::FakeServer),
}

fn mic_app(status: Access) -> MicApp {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    std::fs::create_dir_all(&root).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = rt
        .block_on(persyk::realtime::fake::spawn(one_utterance(
            "permission",
            "Said after the prompt.",
        )))
        .unwrap();
    let mut settings = Settings::default();
    settings.sessions.directory = Some(root.clone());
    settings.provider.base_url = Some(format!("ws://{}/v1", server.addr));
    let permission = Arc::new(ManualPermission {
        status: Mutex::new(status),
        pending: Mutex::new(None),
    });
    let opened = Arc::new(AtomicBool::new(false));
    let waker = Waker::new();
    let backend = BackendHandle::spawn(
        BackendConfig {
            settings_path: None,
            dev: true,
            microphone: Arc::new(PermittedMic {
                permission: permission.clone(),
                opened: opened.clone(),
            }),
            keys: Arc::new(MemKeys::with(Some("sk-test"))),
            replay_factor: 0.0,
            frontmost: persyk::app::frontmost::unknown(),
            updates: persyk::app::backend::UpdateConfig::off(),
        },
        settings.clone(),
        waker.clone(),
    )
    .unwrap();
    let urls = UrlEffects::default();
    let ui = PersykUi::new(backend, Box::new(urls.clone()), waker, settings, true);
    let harness = Harness::builder()
        .with_size(eframe::egui::vec2(640.0, 900.0))
        .build_ui_state(|ui, state: &mut PersykUi| state.ui(ui), ui);
    MicApp {
        harness,
        permission,
        opened,
        urls,
        root,
        _dir: dir,
        _fake: (rt, server),
    }
}

impl MicApp {
    fn wait_label(&mut self, text: &str) {
        let start = Instant::now();
        loop {
            self.harness.step();
            if self
                .harness
                .query_all_by_label_contains(text)
                .next()
                .is_some()
            {
                return;
            }
            assert!(start.elapsed() < WAIT, "timed out waiting for {text:?}");
            std::thread::sleep(Duration::from_millis(15));
        }
    }

    fn click(&mut self, label: &str) {
        self.harness
            .get_by_role_and_label(Role::Button, label)
            .click();
        self.harness.step();
        self.harness.step();
    }

    fn sessions(&self) -> usize {
        std::fs::read_dir(&self.root).unwrap().count()
    }
}

/// Issue #11 item 1: the microphone permission was only read, never requested, so with
/// nobody having decided a capture started, recorded zeros without a prompt and halted with
/// `capture.silent-input`. Now Start asks first, says it waits, and opens the input only
/// after access was granted.
#[test]
fn issue11_01_microphone_access_is_asked_before_the_input_opens() {
    let mut app = mic_app(Access::NotDetermined);
    app.harness.step();
    app.click("Start dictation");
    app.wait_label("Waiting for microphone permission…");
    // The question is open: no input, no session, no silence detector yet.
    assert!(!app.opened.load(Ordering::SeqCst));
    assert_eq!(app.sessions(), 0);
    app.permission.answer(true);
    app.wait_label("Said after the prompt.");
    assert!(app.opened.load(Ordering::SeqCst));
    assert_eq!(app.sessions(), 1);
}

/// Issue #11 item 1, refused: Start says `capture.permission-denied`, explains where to turn
/// the microphone on and opens that System Settings pane; nothing is recorded, so no empty
/// session appears in the history.
#[test]
fn issue11_01_a_refused_microphone_explains_and_records_nothing() {
    let mut app = mic_app(Access::NotDetermined);
    app.harness.step();
    app.click("Start dictation");
    app.wait_label("Waiting for microphone permission…");
    app.permission.answer(false);
    app.wait_label("capture.permission-denied");
    assert!(!app.opened.load(Ordering::SeqCst));
    assert_eq!(app.sessions(), 0);
    app.click("Open Microphone Privacy Settings");
    assert_eq!(
        app.urls.0.lock().unwrap().clone(),
        vec![PRIVACY_MICROPHONE_URL.to_owned()]
    );
    // Denied earlier: the next Start refuses at once, without asking again.
    app.click("Start dictation");
    app.wait_label("capture.permission-denied");
    assert!(app.permission.pending.lock().unwrap().is_none());
    assert!(!app.opened.load(Ordering::SeqCst));
    assert_eq!(app.sessions(), 0);
}

// ---------------------------------------------------------------------------------------------
// Where the API key lives on Linux (issue #16 item 10).

/// Runs this binary's test `name` again in a child under `dbus-run-session` (a private
/// session bus with no Secret Service on it). Returns `true` in the child.
#[cfg(target_os = "linux")]
fn in_dbus_child(name: &str) -> bool {
    if std::env::var_os("PERSYK_TEST_DBUS_CHILD").is_some() {
        return true;
    }
    let exe = std::env::current_exe().expect("test binary");
    let out = match std::process::Command::new("dbus-run-session")
        .arg("--")
        .arg(exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("PERSYK_TEST_DBUS_CHILD", "1")
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .output()
    {
        Ok(o) => o,
        Err(_) => {
            eprintln!("SKIPPED: dbus-run-session is not installed (apt-get install dbus-daemon)");
            return false;
        }
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "the test failed on its own bus:\n{text}"
    );
    assert!(text.contains("1 passed"), "the child ran no test:\n{text}");
    false
}

/// Issue #16 item 10, the fallback: on Linux the key went to the kernel keyring, which
/// forgets it at reboot, while Settings said it was kept in the system's secret store. With
/// no Secret Service on the session bus, Settings now says how long the key lasts.
#[cfg(target_os = "linux")]
#[test]
fn issue16_10_without_a_secret_service_settings_say_the_key_lasts_until_reboot() {
    use persyk::credentials::{self, KeyStorage};
    if !in_dbus_child(
        "app::issue16_10_without_a_secret_service_settings_say_the_key_lasts_until_reboot",
    ) {
        return;
    }
    assert_eq!(credentials::storage(), KeyStorage::KernelKeyring);
    let mut f = fixture(None, None, 1.0, |_| {});
    f.ui.set_key_storage(credentials::storage());
    let mut harness = Harness::builder()
        .with_size(eframe::egui::vec2(640.0, 900.0))
        .build_ui_state(|ui, state: &mut PersykUi| state.ui(ui), f.ui);
    harness.step();
    let said = |h: &Harness<'static, PersykUi>, text: &str| {
        h.query_all_by_label_contains(text).next().is_some()
    };
    assert!(said(&harness, "only until you restart the computer"));
    assert!(!said(&harness, "kept in the system's secret store"));
}

/// A Secret Service on the test's own session bus, enough for one item in one collection
/// (the shape GNOME Keyring answers with), built with zbus's own interface macro so the
/// wire format is the library's, not the client's.
#[cfg(target_os = "linux")]
mod fake_secret_service {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value};

    pub const COLLECTION: &str = "/org/freedesktop/secrets/collection/login";
    type Secret = (OwnedObjectPath, Vec<u8>, Vec<u8>, String);

    #[derive(Default)]
    pub struct State {
        /// Item path → (attributes, secret value).
        pub items: HashMap<String, (HashMap<String, String>, Vec<u8>)>,
        pub next: u32,
    }

    pub type Shared = Arc<Mutex<State>>;

    pub struct Service(pub Shared);
    pub struct Collection(pub Shared);
    pub struct Item(pub Shared, pub String);

    #[zbus::interface(name = "org.freedesktop.Secret.Service")]
    impl Service {
        fn open_session(
            &self,
            algorithm: &str,
            _input: Value<'_>,
        ) -> zbus::fdo::Result<(OwnedValue, OwnedObjectPath)> {
            if algorithm != "plain" {
                return Err(zbus::fdo::Error::NotSupported(algorithm.into()));
            }
            Ok((
                OwnedValue::try_from(Value::from("")).unwrap(),
                OwnedObjectPath::try_from("/org/freedesktop/secrets/session/1").unwrap(),
            ))
        }

        fn search_items(
            &self,
            attributes: HashMap<String, String>,
        ) -> (Vec<OwnedObjectPath>, Vec<OwnedObjectPath>) {
            let state = self.0.lock().unwrap();
            let found = state
                .items
                .iter()
                .filter(|(_, (a, _))| attributes.iter().all(|(k, v)| a.get(k) == Some(v)))
                .map(|(p, _)| OwnedObjectPath::try_from(p.clone()).unwrap())
                .collect();
            (found, Vec::new())
        }

        fn unlock(&self, objects: Vec<OwnedObjectPath>) -> (Vec<OwnedObjectPath>, OwnedObjectPath) {
            (objects, OwnedObjectPath::try_from("/").unwrap())
        }

        fn read_alias(&self, name: &str) -> OwnedObjectPath {
            OwnedObjectPath::try_from(if name == "default" { COLLECTION } else { "/" }).unwrap()
        }

        fn get_secrets(
            &self,
            items: Vec<OwnedObjectPath>,
            session: OwnedObjectPath,
        ) -> HashMap<OwnedObjectPath, Secret> {
            let state = self.0.lock().unwrap();
            items
                .into_iter()
                .filter_map(|p| {
                    let (_, value) = state.items.get(p.as_str())?;
                    Some((
                        p,
                        (
                            session.clone(),
                            Vec::new(),
                            value.clone(),
                            "text/plain".into(),
                        ),
                    ))
                })
                .collect()
        }
    }

    #[zbus::interface(name = "org.freedesktop.Secret.Collection")]
    impl Collection {
        async fn create_item(
            &self,
            properties: HashMap<String, OwnedValue>,
            secret: Secret,
            replace: bool,
            #[zbus(object_server)] server: &zbus::ObjectServer,
        ) -> zbus::fdo::Result<(OwnedObjectPath, OwnedObjectPath)> {
            let attributes: HashMap<String, String> = properties
                .get("org.freedesktop.Secret.Item.Attributes")
                .and_then(|v| HashMap::try_from(v.try_clone().ok()?).ok())
                .ok_or_else(|| zbus::fdo::Error::InvalidArgs("attributes".into()))?;
            let path = {
                let mut state = self.0.lock().unwrap();
                let existing = state
                    .items
                    .iter()
                    .find(|(_, (a, _))| *a == attributes)
                    .map(|(p, _)| p.clone());
                match existing {
                    Some(p) if replace => {
                        state.items.insert(p.clone(), (attributes, secret.2));
                        p
                    }
                    _ => {
                        state.next += 1;
                        let p = format!("{COLLECTION}/{}", state.next);
                        state.items.insert(p.clone(), (attributes, secret.2));
                        p
                    }
                }
            };
            server
                .at(path.as_str(), Item(self.0.clone(), path.clone()))
                .await?;
            Ok((
                OwnedObjectPath::try_from(path).unwrap(),
                OwnedObjectPath::try_from("/").unwrap(),
            ))
        }
    }

    #[zbus::interface(name = "org.freedesktop.Secret.Item")]
    impl Item {
        fn delete(&self) -> OwnedObjectPath {
            self.0.lock().unwrap().items.remove(&self.1);
            OwnedObjectPath::try_from("/").unwrap()
        }
    }

    /// Serves the fake as `org.freedesktop.secrets` on the session bus.
    pub fn serve() -> (zbus::blocking::Connection, Shared) {
        let state = Shared::default();
        let conn = zbus::blocking::connection::Builder::session()
            .unwrap()
            .serve_at("/org/freedesktop/secrets", Service(state.clone()))
            .unwrap()
            .serve_at(COLLECTION, Collection(state.clone()))
            .unwrap()
            .name("org.freedesktop.secrets")
            .unwrap()
            .build()
            .unwrap();
        (conn, state)
    }
}

/// Issue #16 item 10, the fix: where the session bus offers a Secret Service, the key goes
/// there (kept across reboots), under the attributes `secret-tool lookup service
/// app.persyk.Persyk username openai-api-key` finds, and Settings says so.
#[cfg(target_os = "linux")]
#[test]
fn issue16_10_the_key_goes_to_the_secret_service_where_there_is_one() {
    use persyk::credentials::{self, KeyEntry, KeyStorage};
    if !in_dbus_child("app::issue16_10_the_key_goes_to_the_secret_service_where_there_is_one") {
        return;
    }
    let (_conn, state) = fake_secret_service::serve();
    assert_eq!(credentials::storage(), KeyStorage::SecretService);
    const KEY: &str = "sk-persyk-test-0123456789abcdef";
    // The test's own entry (issue #25 item 5): storing also drops a kernel-keyring copy,
    // which must never be the developer's.
    let entry = KeyEntry::for_tests("secret-service");
    entry.store_key(KEY).expect("stored in the Secret Service");
    {
        let s = state.lock().unwrap();
        assert_eq!(s.items.len(), 1);
        let (attributes, value) = s.items.values().next().unwrap();
        assert_eq!(
            attributes.get("service").map(String::as_str),
            Some(entry.service())
        );
        assert_eq!(
            attributes.get("username").map(String::as_str),
            Some(credentials::ACCOUNT)
        );
        assert_eq!(value.as_slice(), KEY.as_bytes());
    }
    assert_eq!(entry.stored_key().unwrap().as_deref(), Some(KEY));
    // Replacing keeps one item.
    entry
        .store_key("sk-persyk-test-replaced-0123456789")
        .unwrap();
    assert_eq!(state.lock().unwrap().items.len(), 1);
    assert_eq!(
        entry.stored_key().unwrap().as_deref(),
        Some("sk-persyk-test-replaced-0123456789")
    );
    entry.delete_key().unwrap();
    assert!(state.lock().unwrap().items.is_empty());
    assert_eq!(entry.stored_key().unwrap(), None);
    assert!(
        KeyStorage::SecretService
            .describe()
            .contains("across restarts")
    );
}

// ---------------------------------------------------------------------------------------------
// Issue 14, item 5: a designed window.

/// Every field and list of the Settings page in `harness`, with its rect: none may end past
/// `width` (the window's right edge). At least `at_least` must be found (the page showed).
fn fields_inside(harness: &Harness<'static, PersykUi>, width: f32, at_least: usize) {
    let mut found = 0;
    for role in [
        Role::TextInput,
        Role::PasswordInput,
        Role::MultilineTextInput,
        Role::ComboBox,
    ] {
        for node in harness.query_all_by_role(role) {
            found += 1;
            let rect = node.rect();
            assert!(
                rect.left() >= 0.0 && rect.right() <= width,
                "{role:?} {node:?} spans x {:.0}…{:.0}, outside the {width:.0}-point window",
                rect.left(),
                rect.right()
            );
        }
    }
    assert!(found >= at_least, "only {found} fields found on the page");
}

#[test]
fn issue14_05_settings_fields_stay_inside_the_default_520_point_window() {
    // The default window is 520 points wide (`app::native_options`); under Xvfb the
    // Settings fields ran off its right edge. Also at the smallest window (360 points).
    // Tall, so the whole page shows without scrolling.
    for width in [520.0, 360.0] {
        let f = fixture(None, Some("sk-test-design"), 1.0, |_| {});
        let mut ui = f.ui;
        ui.show_page(persyk::app::ui::Page::Settings);
        let mut harness = Harness::builder()
            .with_size(eframe::egui::vec2(width, 1600.0))
            .with_context_setup(persyk::app::ui::style::install)
            .build_ui_state(|ui, state: &mut PersykUi| state.ui(ui), ui);
        harness.run_steps(4);
        // Online: key, URL, model, language, words, microphone, noise reduction, hotkey,
        // sessions folder, other folders.
        fields_inside(&harness, width, 10);
        // On this device: the model file field instead of the provider's fields.
        harness
            .get_by_role_and_label(Role::RadioButton, "On this device (Whisper)")
            .click();
        harness.run_steps(4);
        fields_inside(&harness, width, 5);
        drop(harness);
        drop(f.dir);
    }
}

/// Issue #15 item 2, "the live dictation view of a long recording follows the same rule":
/// the Dictation page laid out (and exposed to accessibility) every message of the running
/// recording each frame, so a 10-minute transcript cost ~2.5 ms a frame at 10 frames a
/// second. Now only the rows in view are laid out, and the list follows the newest words.
/// Before: all 600 messages were exposed.
#[test]
fn issue15_09_a_long_live_transcript_lays_out_only_the_rows_in_view() {
    use persyk::app::model::{AudioOrigin, Live, Update};
    use persyk::recognize::Speaker;
    use persyk::recognize::{EngineState, EngineView, PublishedMessage};
    use std::sync::atomic::AtomicU32;

    let f = fixture(None, Some("sk-test"), 1.0, |_| {});
    let view = EngineView {
        state: EngineState::Streaming,
        provisional: vec![("item_live".into(), "and these words are still".into())],
        messages: (0..600)
            .map(|i| PublishedMessage {
                entry_id: format!("entry-{i}"),
                item_id: format!("item_{i}"),
                speaker: Speaker::User,
                text: format!("spoken sentence number {i} of a long dictation"),
                removed: false,
            })
            .collect(),
        gaps: 1,
        gap_at: vec![300],
        heard_ms: 0,
    };
    let (tx, rx) = tokio::sync::watch::channel(view);
    let mut harness = Harness::builder()
        .with_size(eframe::egui::vec2(520.0, 600.0))
        .build_ui_state(|ui, state: &mut PersykUi| state.ui(ui), f.ui);
    harness.state_mut().apply(Update::Started {
        session: f.root.join("live-session"),
        origin: AudioOrigin::Microphone,
        live: Live {
            view: rx,
            level: Arc::new(AtomicU32::new(0.1f32.to_bits())),
        },
        cleanup: None,
        app: None,
    });
    for _ in 0..4 {
        harness.step();
    }
    let exposed = harness
        .query_all_by_label_contains("spoken sentence number")
        .count();
    assert!(
        exposed > 0 && exposed < 60,
        "{exposed} of 600 messages laid out"
    );
    // The newest words are in view (the list follows the end), the first ones are not.
    assert!(
        harness
            .query_by_label_contains("spoken sentence number 599 ")
            .is_some()
    );
    assert!(
        harness
            .query_by_label_contains("spoken sentence number 0 ")
            .is_none()
    );
    assert!(
        harness
            .query_by_label_contains("and these words are still")
            .is_some()
    );
    // A message published while the end is in view is shown at once.
    tx.send_modify(|v| {
        v.messages.push(PublishedMessage {
            entry_id: "entry-600".into(),
            item_id: "item_600".into(),
            speaker: Speaker::User,
            text: "spoken sentence number 600 of a long dictation".into(),
            removed: false,
        });
    });
    for _ in 0..4 {
        harness.step();
    }
    assert!(
        harness
            .query_by_label_contains("spoken sentence number 600 ")
            .is_some()
    );
}

/// Writes a session of `count` user messages of about 1,300 characters each (a long
/// dictation), each starting `Long message N:`; returns the session folder.
fn long_message_session(root: &std::path::Path, count: usize) -> std::path::PathBuf {
    let dir = root.join("long");
    std::fs::create_dir_all(&dir).unwrap();
    let id = "00000000-0000-4000-8000-000000000015";
    let created = "2026-01-01T10:00:00.000Z";
    let mut out = format!(
        "{{\"type\":\"session\",\"version\":1,\"id\":\"{id}\",\"timestamp\":\"{created}\"}}\n"
    );
    let mut parent = "null".to_owned();
    let words = [
        "river", "window", "orange", "quiet", "thunder", "pencil", "garden", "silver",
    ];
    for i in 0..count {
        let mut text = format!("Long message {i}:");
        let mut w = i;
        while text.len() < 1_300 {
            text.push(' ');
            text.push_str(words[w % words.len()]);
            w = (w * 7 + 3) % 1_000_003;
        }
        let mid = format!("{id}-m{i}");
        out.push_str(&format!(
            "{{\"type\":\"message\",\"id\":\"{mid}\",\"parentId\":{parent},\"timestamp\":\"{created}\",\
             \"message\":{{\"role\":\"user\",\"timestamp\":1,\"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}}]}}}}\n"
        ));
        parent = format!("\"{mid}\"");
    }
    std::fs::write(dir.join("session.jsonl"), out).unwrap();
    dir
}

/// The messages of the opened session laid out (exposed to accessibility), by number.
fn long_messages_shown(harness: &Harness<'static, PersykUi>) -> std::collections::BTreeSet<usize> {
    use egui_kittest::kittest::NodeT;
    harness
        .query_all_by_label_contains("Long message ")
        .filter_map(|n| {
            // A label's text is its AccessKit value.
            let label = n.accesskit_node().value()?;
            let rest = label.strip_prefix("Long message ")?;
            rest.split(':').next()?.parse().ok()
        })
        .collect()
}

/// Issue #15, "frame time stays < 2 ms while scrolling": the slowest frames scrolling an
/// opened long session were the ones where a screenful of messages never laid out before
/// came into view (a fast scroll brings one every frame), each laid out — its text shaped
/// — in that one frame: ≈ 4,000 characters of long messages, 2.6–4 ms in release. Now a
/// frame lays out at most a budget of new text (and always one message); the rest appears
/// the frames after. Counted, not timed: messages newly laid out per frame. Before: 2–3
/// messages of 1,300 characters arrived in the same frame.
#[test]
fn issue15_16_a_fast_scroll_lays_out_a_bounded_amount_of_new_text_per_frame() {
    let f = fixture(None, Some("sk-test"), 1.0, |_| {});
    long_message_session(&f.root, 600);
    let mut harness = Harness::builder()
        .with_size(eframe::egui::vec2(520.0, 600.0))
        .build_ui_state(|ui, state: &mut PersykUi| state.ui(ui), f.ui);
    harness.state_mut().show_page(persyk::app::ui::Page::Search);
    let start = Instant::now();
    while harness
        .query_all_by_role_and_label(Role::Button, "Open")
        .next()
        .is_none()
    {
        assert!(start.elapsed() < Duration::from_secs(60), "no result row");
        harness.step();
        std::thread::sleep(Duration::from_millis(5));
    }
    harness.get_by_role_and_label(Role::Button, "Open").click();
    let start = Instant::now();
    // Opened: the read-only view with its first message (the result row has it too).
    while harness
        .query_all_by_label_contains("Read-only: the session as it was")
        .next()
        .is_none()
        || !long_messages_shown(&harness).contains(&0)
    {
        assert!(start.elapsed() < Duration::from_secs(60), "not opened");
        harness.step();
        std::thread::sleep(Duration::from_millis(5));
    }
    for _ in 0..5 {
        harness.step();
    }
    harness.hover_at(eframe::egui::pos2(260.0, 400.0));
    harness.step();
    let mut before = long_messages_shown(&harness);
    let mut most_new = 0;
    let mut seen = before.clone();
    for _ in 0..30 {
        harness.event(eframe::egui::Event::MouseWheel {
            unit: eframe::egui::MouseWheelUnit::Point,
            delta: eframe::egui::vec2(0.0, -1_500.0),
            phase: eframe::egui::TouchPhase::Move,
            source: eframe::egui::MouseWheelSource::Unknown,
            modifiers: eframe::egui::Modifiers::default(),
        });
        harness.step();
        let now = long_messages_shown(&harness);
        let new = now.difference(&before).count();
        most_new = most_new.max(new);
        seen.extend(now.iter().copied());
        before = now;
    }
    assert!(
        seen.len() > 10,
        "the scroll moved through the session ({} messages seen)",
        seen.len()
    );
    assert!(
        most_new <= 1,
        "{most_new} messages of 1,300 characters laid out anew in one frame"
    );
    // Once the scroll stops, the rest of the view fills in.
    for _ in 0..10 {
        harness.step();
    }
    assert!(long_messages_shown(&harness).len() >= 2);
    assert!(harness.state_mut().shutdown(Duration::from_secs(30)));
}

/// Issue #15, "history at scale": the Search page's results laid out every row every frame
/// (500 rows: 1.8 ms in release). Now they are a virtual list like the opened session: only
/// the rows in view are laid out and exposed to accessibility, with their day header, and
/// ↓ brings a far row into view. Before: all 500 rows (500 Open buttons) were exposed.
#[test]
fn issue15_17_the_search_list_lays_out_only_the_rows_in_view() {
    use persyk::app::model::{ResultRow, SearchResults, Update};
    let f = fixture(None, Some("sk-test"), 1.0, |_| {});
    let mut harness = Harness::builder()
        .with_size(eframe::egui::vec2(520.0, 600.0))
        .build_ui_state(|ui, state: &mut PersykUi| state.ui(ui), f.ui);
    harness.state_mut().show_page(persyk::app::ui::Page::Search);
    // The backend's answer for the empty root first (generation 1), then 500 rows for it.
    let start = Instant::now();
    while harness
        .query_all_by_label_contains("No sessions yet.")
        .next()
        .is_none()
    {
        assert!(start.elapsed() < Duration::from_secs(60), "no answer");
        harness.step();
        std::thread::sleep(Duration::from_millis(5));
    }
    let rows = (0..500)
        .map(|i| ResultRow {
            location: f.root.join(format!("s{i}")),
            session_id: None,
            leaf: None,
            label: format!("Result number {i}"),
            created: Some(format!("2026-01-{:02}T10:00:00Z", 28 - i / 20)),
            duration_ms: Some(65_000),
            excerpt: None,
            duplicate_of: None,
            diagnostic: None,
            needs_recovery: false,
            from_file: None,
            other_mac: None,
            copies: 0,
            syncing: false,
            recording_on: None,
        })
        .collect();
    harness
        .state_mut()
        .apply(Update::Results(Box::new(SearchResults {
            generation: 1,
            rows,
            ..SearchResults::default()
        })));
    harness.run();
    let opens = harness
        .query_all_by_role_and_label(Role::Button, "Open")
        .count();
    assert!(opens > 0 && opens < 60, "{opens} of 500 rows laid out");
    assert!(harness.query_by_label("Result number 0").is_some());
    assert!(harness.query_by_label("Result number 499").is_none());
    // The first row's day header is there.
    assert_eq!(harness.query_all_by_label_contains("28 January").count(), 1);
    // ↓ 60 times: row 59 is selected and scrolled into view.
    for _ in 0..60 {
        harness.key_press(eframe::egui::Key::ArrowDown);
        harness.step();
    }
    harness.run();
    assert!(harness.query_by_label("Result number 59").is_some());
    assert!(harness.query_by_label("Result number 0").is_none());
    assert!(harness.state_mut().shutdown(Duration::from_secs(30)));
}

/// Copy carried "[audio] " (and "[image] ") in front of the words: history text came from
/// `display_text`, which writes every non-text block as `[type]`. Every copy path (a row's
/// Copy and ⌘C, Copy all, a message's Copy, the menu's Recent) reads the opened session's
/// message text, so that text is the spoken words alone.
#[test]
fn issue24_06_copy_carries_only_the_spoken_text() {
    let tmp = tempfile::tempdir().expect("tmp");
    let session = tmp.path().join("0195b4a2-0000-7000-8000-000000000001");
    std::fs::create_dir_all(session.join("assets")).expect("session dir");
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/golden/assets.jsonl"),
        session.join("session.jsonl"),
    )
    .expect("fixture");
    let opened = persyk::app::backend::open_session(&session, None).expect("opened");
    let pages = opened.pages.expect("messages");
    let mut texts = Vec::new();
    let mut start = 0;
    while start < pages.total {
        let page = pages.read(start).expect("page");
        start += page.len();
        texts.extend(
            page.into_iter()
                .filter(|m| m.role == "user")
                .map(|m| m.text),
        );
    }
    assert!(texts.len() >= 3, "{texts:?}");
    for t in &texts {
        assert!(!t.contains('['), "a block's type in the copied text: {t:?}");
    }
    assert!(
        texts.contains(&"That's the sketch.".to_owned()),
        "{texts:?}"
    );
    assert_eq!(
        texts[0],
        "Measurements for the shelf: ninety centimetres wide, thirty deep."
    );
}

// ---------------------------------------------------------------------------------------------
// Issue 24: no dead ends for a new user.

/// A microphone that refuses with one code: a start that never records.
struct RefusingMic(&'static str);

impl Microphone for RefusingMic {
    fn open(
        &self,
        _device: Option<&str>,
        _pre_roll_ms: u32,
    ) -> Result<(Box<dyn AudioSource>, SourceKind), String> {
        Err(self.0.to_owned())
    }
}

/// Issue 24, item 4: a refused start said "Could not start: … (capture.silent-input)", a
/// finished recording "Saved: 13.7 s, complete" and "Session: /…/01a2…", a running one
/// "Saving to /…". The main flow says sentences with the fix beside them; codes stay in a
/// details line.
#[test]
fn issue24_04_refusals_are_sentences_with_their_fix_and_the_code_in_details() {
    let f = app_support::fixture_with(
        None,
        Some("sk-test"),
        Arc::new(RefusingMic("capture.silent-input")),
        None,
        |_| {},
    );
    let mut app = UiApp::new(f, 640.0, 900.0);
    app.click("Start dictation");
    app.wait_label("The microphone sent only silence.");
    assert!(app.has_label("Details: capture.silent-input"));
    assert!(!app.has_label("Could not start"));
    assert!(
        app.harness
            .query_all_by_label("capture.silent-input")
            .next()
            .is_none(),
        "a bare code in the main flow"
    );
    app.click("Choose microphone");
    assert_eq!(app.harness.state().page(), Page::Settings);
    assert!(
        std::fs::read_dir(&app.root).unwrap().next().is_none(),
        "nothing recorded"
    );
    app.shutdown();

    // A recording: no path while it runs or after, and the length as a clock.
    let f = fixture(
        Some(one_utterance("issue24-04", "Said in a sentence.")),
        Some("sk-test"),
        30.0,
        |_| {},
    );
    let mut app = UiApp::new(f, 640.0, 900.0);
    let root = app.root.display().to_string();
    app.click("Start dictation");
    app.wait_label("Saved to disk as you speak");
    assert!(!app.has_label(&root), "a path while recording");
    app.wait_until("the message", |h| {
        h.query_all_by_label_contains("Said in a sentence.")
            .next()
            .is_some()
    });
    app.click("Stop dictation");
    app.wait_label(" recorded.");
    assert!(app.has_label("Saved: 0:"));
    assert!(!app.has_label("complete"));
    assert!(!app.has_label(&root), "a path after the recording");
    assert!(!app.has_label("Session:"));
    app.shutdown();
}

/// Issue 24, item 5: a failed notification was a red error on every page until restart.
/// Settings says it once, with how to turn notifications on; the other pages say nothing.
#[test]
fn issue24_05_a_failed_notification_is_said_once_in_settings() {
    let f = fixture(None, Some("sk-test"), 1.0, |_| {});
    let failures = f.effects.notify_failures.clone();
    let mut app = UiApp::new(f, 640.0, 1400.0);
    app.harness.step();
    failures
        .lock()
        .unwrap()
        .push("notifications are off for Persyk".into());
    app.harness.step();
    app.harness.step();
    assert!(!app.has_label("could not be shown"));
    assert!(!app.has_label("Notifications are off"));
    app.harness.state_mut().show_page(Page::Settings);
    app.harness.step();
    let said = |app: &UiApp| {
        app.harness
            .query_all_by_label_contains("Notifications are off")
            .count()
    };
    assert_eq!(said(&app), 1);
    // Another failure is not said again.
    failures.lock().unwrap().push("again".into());
    app.harness.step();
    app.harness.step();
    assert_eq!(said(&app), 1);
    app.harness.state_mut().show_page(Page::Search);
    app.harness.step();
    assert_eq!(said(&app), 0);
    app.shutdown();
}

/// Issue 24, item 11: settings applied only on Save at the very bottom, and hotkey errors
/// were stacked there. A change applies when made; a hotkey error shows under the hotkey
/// field and goes once the field is fixed.
#[test]
fn issue24_11_settings_apply_when_made_and_hotkey_errors_sit_beside_the_field() {
    use persyk::settings::HotkeyMode;
    let f = fixture(None, Some("sk-test"), 1.0, |_| {});
    let mut app = UiApp::new(f, 640.0, 1400.0);
    app.harness.state_mut().show_page(Page::Settings);
    app.harness.step();
    // A choice applies at once: nothing else pressed.
    app.harness
        .get_by_role_and_label(Role::RadioButton, "Push to talk")
        .click();
    app.wait_until("the choice to be saved", |h| {
        h.state().settings().hotkey.mode == HotkeyMode::PushToTalk
    });
    assert_eq!(
        Settings::load(&app.config).unwrap().hotkey.mode,
        HotkeyMode::PushToTalk
    );
    // A hotkey that is no combination: said under its field while it is wrong.
    let retype = |app: &mut UiApp, text: &str| {
        app.harness.get_by_label("Global hotkey").focus();
        app.harness.step();
        app.harness
            .key_press_modifiers(eframe::egui::Modifiers::COMMAND, eframe::egui::Key::A);
        app.harness.get_by_label("Global hotkey").type_text(text);
        app.harness.step();
        app.harness.step();
    };
    retype(&mut app, "alt+");
    let error = "Not a key combination Persyk understands: try Alt+Space or Ctrl+Shift+D.";
    let field = app.harness.get_by_label("Global hotkey").rect();
    let said = app.harness.get_by_label(error).rect();
    let mode = app.harness.get_by_label("Hotkey mode").rect();
    assert!(
        said.top() >= field.bottom() && said.bottom() <= mode.top(),
        "the error sits between the field ({field:?}) and the next row ({mode:?}): {said:?}"
    );
    assert!(app.has_label("Details: hotkey.invalid"));
    // Leaving the field does not save it.
    app.harness
        .get_by_role_and_label(Role::RadioButton, "Toggle")
        .click();
    app.harness.step();
    app.harness.step();
    assert!(app.has_label(error));
    let saved = Settings::load(&app.config).unwrap();
    assert_ne!(saved.hotkey.keys.as_deref(), Some("alt+"));
    // Fixed: the error goes at once, and leaving the field saves it.
    retype(&mut app, "Ctrl+Shift+D");
    assert!(!app.has_label(error));
    app.harness
        .get_by_role_and_label(Role::RadioButton, "Push to talk")
        .click();
    app.wait_until("the fixed hotkey to be saved", |h| {
        h.state().settings().hotkey.keys.as_deref() == Some("Ctrl+Shift+D")
    });
    assert_eq!(
        Settings::load(&app.config).unwrap().hotkey.keys.as_deref(),
        Some("Ctrl+Shift+D")
    );
    app.shutdown();
}

/// Issue 24, item 12: the theme followed only what the system reported (on X11: nothing, so
/// always light). Settings › Appearance sets Light or Dark, applied at once and kept.
#[test]
fn issue24_12_the_theme_can_be_set_to_light_or_dark() {
    use eframe::egui::Theme;
    use persyk::settings::ThemeChoice;
    let f = fixture(None, Some("sk-test"), 1.0, |_| {});
    // Tall enough for the whole Settings page: the clicks land where the radios are drawn.
    let mut app = UiApp::new(f, 640.0, 2400.0);
    app.harness.state_mut().show_page(Page::Settings);
    app.harness.step();
    app.harness
        .get_by_role_and_label(Role::RadioButton, "Dark")
        .click();
    app.harness.step();
    app.harness.step();
    assert_eq!(app.harness.ctx.theme(), Theme::Dark);
    app.wait_until("the theme to be saved", |h| {
        h.state().settings().appearance.theme == ThemeChoice::Dark
    });
    app.harness
        .get_by_role_and_label(Role::RadioButton, "Light")
        .click();
    app.harness.step();
    app.harness.step();
    assert_eq!(app.harness.ctx.theme(), Theme::Light);
    app.harness
        .get_by_role_and_label(Role::RadioButton, "Dark")
        .click();
    app.wait_until("the theme to be saved", |h| {
        h.state().settings().appearance.theme == ThemeChoice::Dark
    });
    let saved = Settings::load(&app.config).unwrap();
    assert_eq!(saved.appearance.theme, ThemeChoice::Dark);
    app.shutdown();

    // The next launch opens dark.
    let f = fixture(None, Some("sk-test"), 1.0, |s| {
        s.appearance.theme = ThemeChoice::Dark;
    });
    let mut app = UiApp::new(f, 640.0, 900.0);
    app.harness.step();
    app.harness.step();
    assert_eq!(app.harness.ctx.theme(), Theme::Dark);
    app.shutdown();
}

/// A microphone that opens but whose stream fails as it starts: a start without audio.
struct DeadStreamMic;

struct DeadStream;

impl AudioSource for DeadStream {
    fn format(&self) -> persyk::capture::source::SourceFormat {
        persyk::capture::source::SourceFormat {
            rate_hz: 24_000,
            channels: 1,
        }
    }
    fn start(
        &mut self,
        _events: std::sync::mpsc::SyncSender<persyk::capture::source::SourceEvent>,
    ) -> Result<(), persyk::capture::source::SourceError> {
        Err(persyk::capture::source::SourceError::StreamFailed { detail: "test" })
    }
    fn stop(&mut self) {}
}

impl Microphone for DeadStreamMic {
    fn open(
        &self,
        _device: Option<&str>,
        _pre_roll_ms: u32,
    ) -> Result<(Box<dyn AudioSource>, SourceKind), String> {
        Ok((Box::new(DeadStream), SourceKind::Live))
    }
}

/// The published session folders in `root`.
fn session_dirs(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut dirs: Vec<_> = std::fs::read_dir(root)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("session.jsonl").is_file())
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    dirs.sort();
    dirs
}

/// Issue 24, item 7: every failed start left an "Untitled session 0:00" row, and only the
/// session just recorded could be discarded. A start that recorded nothing leaves no
/// session; empty sessions of older versions go in one action; any history row can be
/// deleted, after a confirmation, and leaves the list.
#[test]
fn issue24_07_failed_starts_leave_nothing_and_any_session_can_be_deleted() {
    let f = app_support::fixture_with(None, Some("sk-test"), Arc::new(DeadStreamMic), None, |_| {});
    let mut app = UiApp::new(f, 640.0, 1000.0);
    app.click("Start dictation");
    app.wait_label("Nothing was recorded, so no session was kept.");
    assert!(app.has_label("The recording could not start."));
    assert!(app.has_label("Details: capture.stream-failed"));
    assert!(
        session_dirs(&app.root).is_empty(),
        "a failed start left a session"
    );
    assert_eq!(app.harness.query_all_by_label("Discard").count(), 0);

    // History from an earlier version: two empty sessions and one with words.
    let store = persyk::session::Store::new(
        persyk::session::store::Roots::new(app.root.clone(), Vec::new()).unwrap(),
    );
    for _ in 0..2 {
        store.create_session().unwrap();
    }
    let kept = app.root.join("0195b4a2-0000-7000-8000-00000000aaaa");
    std::fs::create_dir_all(kept.join("assets")).unwrap();
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/golden/dictation-basic.jsonl"),
        kept.join("session.jsonl"),
    )
    .unwrap();
    assert_eq!(session_dirs(&app.root).len(), 3);
    app.harness.state_mut().show_page(Page::Search);
    app.wait_until("three rows", |h| {
        h.query_all_by_role_and_label(Role::Button, "Delete…")
            .count()
            == 3
    });
    app.click("Remove empty sessions");
    app.wait_label("Removed 2 empty session(s).");
    assert_eq!(session_dirs(&app.root), vec![kept.clone()]);
    app.wait_until("one row", |h| {
        h.query_all_by_role_and_label(Role::Button, "Delete…")
            .count()
            == 1
    });

    // Any row can be deleted, after a confirmation.
    app.click("Delete…");
    app.wait_label("Delete this session?");
    app.click("Keep");
    assert!(kept.is_dir(), "Keep must not delete");
    // An opened session has its own Delete… with the same confirmation.
    app.click("Open");
    app.wait_label("Read-only: the session as it was");
    app.click("Delete…");
    app.wait_label("Delete this session?");
    app.click("Delete session");
    app.wait_until("the opened session to close and its row to leave", |h| {
        h.query_all_by_label_contains("Read-only: the session as it was")
            .next()
            .is_none()
            && h.query_all_by_role_and_label(Role::Button, "Delete…")
                .count()
                == 0
    });
    assert!(!kept.exists());
    app.shutdown();
}

/// Issue 24, item 4, on the Search page: a damaged row showed its bare diagnostic code and a
/// failed open "Could not open the session (project.not-authoritative)". Both are sentences
/// now; the code is in the tooltip or the details line.
#[test]
fn issue24_04_history_problems_are_sentences_too() {
    let f = fixture(None, Some("sk-test"), 1.0, |_| {});
    let mut app = UiApp::new(f, 640.0, 900.0);
    let damaged = app.root.join("0195b4a2-0000-7000-8000-00000000bbbb");
    std::fs::create_dir_all(&damaged).unwrap();
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/reject/asset.field-type.jsonl"),
        damaged.join("session.jsonl"),
    )
    .unwrap();
    app.harness.state_mut().show_page(Page::Search);
    app.wait_label("cannot be read fully");
    assert!(!app.has_label("asset.field-type"), "a bare code on the row");
    app.click("Open");
    app.wait_label("This session could not be opened.");
    assert!(app.has_label("Details: "));
    assert!(!app.has_label("Could not open the session ("));
    app.shutdown();
}

/// Issue 24, item 1: the welcome card vanished the moment a download was asked for, and
/// never came back even though nothing had worked. It stays until one dictation has worked,
/// then it is gone, also in the next launch (read from the history, not a flag).
#[test]
fn issue24_01_the_welcome_stays_until_a_dictation_has_worked() {
    let f = fixture(
        Some(one_utterance("issue24-01-welcome", "The first words.")),
        Some("sk-test"),
        30.0,
        |_| {},
    );
    let mut app = UiApp::new(f, 640.0, 1400.0);
    app.harness.state_mut().show_page(Page::Settings);
    app.harness.step();
    assert!(app.has_label("Welcome to Persyk"));
    assert!(app.has_label("Ready to dictate."));
    app.click("Go to Dictation");
    app.click("Start dictation");
    app.wait_until("the first message", |h| {
        h.query_all_by_label_contains("The first words.")
            .next()
            .is_some()
    });
    app.click("Stop dictation");
    app.wait_label(" recorded.");
    app.harness.state_mut().show_page(Page::Settings);
    app.harness.step();
    assert!(!app.has_label("Welcome to Persyk"));

    // The next launch, on the same folder: no welcome.
    let root = app.root.clone();
    let f = fixture(None, Some("sk-test"), 1.0, |s| {
        s.sessions.directory = Some(root);
    });
    let mut again = UiApp::new(f, 640.0, 1400.0);
    again.harness.state_mut().show_page(Page::Settings);
    again.harness.step();
    assert!(!again.has_label("Welcome to Persyk"));
    again.shutdown();
    app.shutdown();
}

// ---------------------------------------------------------------------------------------------
// The system theme on X11 (issue #24 item 12).

/// The desktop portal's `Settings` interface on the test's own bus, answering
/// `org.freedesktop.appearance` / `color-scheme` with the value in the cell.
#[cfg(target_os = "linux")]
struct FakePortal(Arc<std::sync::atomic::AtomicU32>);

#[cfg(target_os = "linux")]
#[zbus::interface(name = "org.freedesktop.portal.Settings")]
impl FakePortal {
    fn read_one(
        &self,
        namespace: &str,
        key: &str,
    ) -> zbus::fdo::Result<zbus::zvariant::OwnedValue> {
        if (namespace, key) != ("org.freedesktop.appearance", "color-scheme") {
            return Err(zbus::fdo::Error::Failed("unknown setting".into()));
        }
        Ok(zbus::zvariant::OwnedValue::from(
            self.0.load(Ordering::SeqCst),
        ))
    }
}

/// Issue #24 item 12: winit reports no theme on X11, so "follow the system" was always
/// light there. The app now reads the desktop portal's `color-scheme` (dark here) when it
/// starts and follows its `SettingChanged` signal; other settings, "no preference" and
/// values the specification does not define change nothing.
#[cfg(target_os = "linux")]
#[test]
fn issue24_12_on_x11_the_system_theme_is_the_desktop_portals() {
    use eframe::egui::{self, Theme};
    if !in_dbus_child("app::issue24_12_on_x11_the_system_theme_is_the_desktop_portals") {
        return;
    }
    const PATH: &str = "/org/freedesktop/portal/desktop";
    let scheme = Arc::new(std::sync::atomic::AtomicU32::new(1));
    let portal = zbus::blocking::connection::Builder::session()
        .unwrap()
        .serve_at(PATH, FakePortal(scheme.clone()))
        .unwrap()
        .name("org.freedesktop.portal.Desktop")
        .unwrap()
        .build()
        .unwrap();
    let ctx = egui::Context::default();
    persyk::app::ui::style::install(&ctx);
    assert_eq!(ctx.theme(), Theme::Light, "no system theme: the fallback");
    // What the watcher applies, in order; applied to the context as the app does.
    let (applied_tx, applied) = std::sync::mpsc::channel();
    let client = zbus::blocking::Connection::session().unwrap();
    {
        let ctx = ctx.clone();
        std::thread::spawn(move || {
            persyk::app::portal::follow_on(&client, |theme| {
                persyk::app::portal::apply(&ctx, theme);
                let _ = applied_tx.send(theme);
            })
        });
    }
    let until = |what: &str, done: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "timed out: {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    until("dark at start", &|| ctx.theme() == Theme::Dark);
    let emit = |namespace: &str, value: u32| {
        portal
            .emit_signal(
                None::<&str>,
                PATH,
                "org.freedesktop.portal.Settings",
                "SettingChanged",
                &(namespace, "color-scheme", zbus::zvariant::Value::U32(value)),
            )
            .unwrap();
    };
    emit("org.freedesktop.appearance", 2);
    until("light after the change", &|| ctx.theme() == Theme::Light);
    emit("org.example.other", 1);
    emit("org.freedesktop.appearance", 0);
    emit("org.freedesktop.appearance", 7);
    emit("org.freedesktop.appearance", 1);
    until("dark again", &|| ctx.theme() == Theme::Dark);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        applied.try_iter().collect::<Vec<_>>(),
        [Theme::Dark, Theme::Light, Theme::Dark],
        "only the last signal changed anything"
    );
}
