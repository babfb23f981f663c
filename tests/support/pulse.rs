//! A private PulseAudio server for tests that capture real sound: its own runtime directory,
//! anonymous auth, a null sink `vsink` whose monitor tests make the default source, so
//! what `paplay --device=vsink` plays is what the microphone hears; or, for tests that only
//! need a live microphone ([`PulseServer::start_sine`]), a 440 Hz sine source as the default.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What these tests run: the server, its control and player, and the speech synthesizer.
pub const TOOLS: [&str; 4] = ["pulseaudio", "pactl", "paplay", "espeak-ng"];

/// A private PulseAudio server, killed on drop.
pub struct PulseServer {
    child: Child,
    socket: PathBuf,
    log: PathBuf,
}

impl PulseServer {
    /// A server with the null sink `vsink` (see the module doc), its files in `dir`.
    pub fn start(dir: &Path) -> PulseServer {
        PulseServer::start_with(dir, "module-null-sink sink_name=vsink")
    }

    /// A microphone in a room: a server with the null sink `vsink` whose monitor is the
    /// default source, and quiet room noise playing into it for `room_seconds` (a room is
    /// never digital silence: a capture that hears only that for 2 s at its start takes the
    /// microphone for dead and halts). What [`PulseServer::say`] plays is what it hears.
    pub fn microphone(dir: &Path, room_seconds: u32) -> (PulseServer, Playing) {
        let server = PulseServer::start(&dir.join("pulse"));
        server
            .pactl(&["set-default-source", "vsink.monitor"])
            .unwrap_or_else(|e| panic!("set-default-source: {e}"));
        let room = server.room_noise(dir, room_seconds);
        (server, room)
    }

    /// Plays `wav` into `vsink` to its end (the microphone of [`PulseServer::microphone`]
    /// hears it).
    pub fn say(&self, wav: &Path) {
        let played = self
            .command("paplay")
            .args(["--device=vsink", "--latency-msec=50"])
            .arg(wav)
            .output()
            .expect("paplay");
        assert!(
            played.status.success(),
            "paplay: {}",
            String::from_utf8_lossy(&played.stderr)
        );
    }

    /// A server whose default source (the microphone) is `tone`, a 440 Hz sine.
    pub fn start_sine(dir: &Path) -> PulseServer {
        let server =
            PulseServer::start_with(dir, "module-sine-source source_name=tone frequency=440");
        server
            .pactl(&["set-default-source", "tone"])
            .unwrap_or_else(|e| panic!("no sine source: {e}"));
        server
    }

    /// A server that loads `module` (a `-L` argument) besides its native protocol socket.
    fn start_with(dir: &Path, module: &str) -> PulseServer {
        let run = dir.join("run");
        let home = dir.join("home");
        for d in [&run, &home] {
            std::fs::create_dir_all(d).unwrap();
        }
        let socket = run.join("native");
        let log = dir.join("pulseaudio.log");
        let child = Command::new("pulseaudio")
            .args([
                "-n",
                "--daemonize=no",
                "--system=false",
                "--exit-idle-time=-1",
                "--use-pid-file=no",
                "--log-target=stderr",
            ])
            .arg("-L")
            .arg(format!(
                "module-native-protocol-unix auth-anonymous=1 socket={}",
                socket.display()
            ))
            .args(["-L", module])
            .env("HOME", &home)
            .env("XDG_RUNTIME_DIR", &run)
            .env("PULSE_RUNTIME_PATH", &run)
            .env("PULSE_STATE_PATH", dir.join("state"))
            .env("XDG_CONFIG_HOME", dir.join("config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("pulseaudio could not be started");
        let mut server = PulseServer { child, socket, log };
        // A guard against hangs only (never a performance threshold).
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if server.socket.exists() && server.pactl(&["info"]).is_ok() {
                return server;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("pulseaudio exited ({status}):\n{}", server.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "pulseaudio did not come up:\n{}",
                server.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn server_env(&self) -> String {
        format!("unix:{}", self.socket.display())
    }

    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("PULSE_SERVER", self.server_env());
        c
    }

    pub fn pactl(&self, args: &[&str]) -> Result<String, String> {
        let out = self
            .command("pactl")
            .args(args)
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// The server's runtime directory (`XDG_RUNTIME_DIR` for its clients).
    pub fn run_dir(&self) -> &Path {
        self.socket
            .parent()
            .expect("the socket is in the runtime directory")
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for PulseServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The tools of [`TOOLS`] that are not on `PATH`.
pub fn missing_tools() -> Vec<&'static str> {
    missing(&TOOLS)
}

/// The programs of `tools` that are not on `PATH` (each asked for `--version`).
pub fn missing(tools: &[&'static str]) -> Vec<&'static str> {
    tools
        .iter()
        .copied()
        .filter(|t| {
            Command::new(t)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_err()
        })
        .collect()
}

/// A `paplay` running in the background, stopped on drop.
pub struct Playing(Child);

impl Drop for Playing {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl PulseServer {
    /// Plays `wav` into the null sink (so into the default source), in the background.
    pub fn play(&self, wav: &Path) -> Playing {
        Playing(
            self.command("paplay")
                .args(["--device=vsink", "--latency-msec=50"])
                .arg(wav)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("paplay"),
        )
    }

    /// Plays quiet room noise (about -66 dBFS) for `seconds` under everything else, so the
    /// microphone is never digital silence: a live capture takes 2 s of that at its start
    /// for a dead input and halts (`capture.silent-input`). The WAV is written into `dir`.
    pub fn room_noise(&self, dir: &Path, seconds: u32) -> Playing {
        let path = dir.join("room-noise.wav");
        let spec = hound::WavSpec {
            channels: 1,
            sample_rate: 24_000,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let mut w = hound::WavWriter::create(&path, spec).expect("room noise WAV");
        let mut seed = 7u64;
        for _ in 0..24_000 * seconds {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            w.write_sample(((seed >> 33) % 33) as i16 - 16)
                .expect("room noise sample");
        }
        w.finalize().expect("room noise WAV");
        self.play(&path)
    }
}

/// `parec` recording the null sink's monitor (what everything played into `vsink` sounds
/// like), 24 kHz mono PCM16, into a file; [`Monitor::finish`] stops it and reads it back.
pub struct Monitor {
    child: Child,
    file: PathBuf,
}

impl PulseServer {
    /// Starts recording `vsink`'s monitor into `file`; returns once the recorder has had
    /// time to attach, so nothing played after it is missed.
    pub fn record_monitor(&self, file: &Path) -> Monitor {
        let child = self
            .command("parec")
            .args([
                "--device=vsink.monitor",
                "--format=s16le",
                "--rate=24000",
                "--channels=1",
                "--latency-msec=20",
            ])
            .stdout(std::fs::File::create(file).expect("monitor file"))
            .stderr(Stdio::null())
            .spawn()
            .expect("parec");
        std::thread::sleep(Duration::from_millis(500));
        Monitor {
            child,
            file: file.to_path_buf(),
        }
    }
}

impl Monitor {
    /// Stops the recorder (SIGINT: parec writes out what it holds) and returns the samples
    /// the sink received.
    pub fn finish(mut self) -> Vec<i16> {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
        std::fs::read(&self.file)
            .expect("what the sink received")
            .chunks_exact(2)
            .map(|b| i16::from_le_bytes([b[0], b[1]]))
            .collect()
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
