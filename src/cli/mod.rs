//! Command-line interface: argument parsing (clap) and dispatch to the library.
//!
//! Exit codes are part of the interface: 0 success, 1 a contract violation in the data,
//! 2 the command could not run (usage, unreadable path), 3 an explicit leaf that does not
//! exist. Diagnostics go to stdout (they are the output of `check`); errors go to stderr.
//!
//! A `-psn_…` argument (the process serial number older macOS passes when Finder or
//! LaunchServices opens `Persyk.app`) is dropped before parsing: clap would reject it, and a
//! menu-bar app (`LSUIElement`) that exits with a usage error shows nothing at all.

mod check;
mod cleanup;
mod context;
#[cfg(feature = "app")]
mod dictate;
mod fake_cmd;
mod models;
mod recording;
mod search_cmds;
mod shown;
mod store_cmds;
mod transcribe;

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "persyk", version, about = "Dictation that never loses a word")]
struct Cli {
    /// Without a command, the menu-bar app starts.
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Start the menu-bar app (the default without a command).
    #[cfg(feature = "app")]
    App {
        /// Start in the menu bar only (ignored where there is no tray).
        #[arg(long)]
        hidden: bool,
        /// An empty window with the same options: the baseline for the app's figures.
        #[arg(long, hide = true)]
        bare: bool,
    },
    /// Validate session files against format v1.
    Check {
        /// Session directories or their session.jsonl files.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Print a JSON array of {path,line,code,message}.
        #[arg(long)]
        json: bool,
    },
    /// Create a new, empty session and print its folder.
    New {
        /// Root to create it in (default: the configured write root).
        #[arg(long)]
        root: Option<PathBuf>,
    },
    /// Append JSONL records from stdin; prints one ack line per durable record.
    Append {
        /// A session directory or its session.jsonl.
        session: PathBuf,
        /// Parent for records without `parentId` (default: the last entry; `null`: new root).
        #[arg(long)]
        leaf: Option<String>,
    },
    /// Explicit recovery: an incomplete final record, conflict copies from a sync engine
    /// (merged), and unfinished recordings.
    Recover {
        /// A session directory or its session.jsonl.
        session: PathBuf,
    },
    /// Report what a session left unfinished (recordings, untranscribed items, removals).
    Status {
        /// A session directory or its session.jsonl.
        session: PathBuf,
    },
    /// Delete a whole session folder.
    Rm {
        /// A session directory.
        session: PathBuf,
        /// Confirm the deletion.
        #[arg(long)]
        yes: bool,
    },
    /// Dictate from the microphone into a new session (Enter stops).
    #[cfg(feature = "app")]
    Dictate {
        /// Keep the microphone warm and start with the last N ms (≤ 500) before the start.
        #[arg(long)]
        pre_roll_ms: Option<u32>,
        /// Stop after this many seconds instead of waiting for Enter.
        #[arg(long)]
        seconds: Option<f64>,
        /// Input device by name (see --list-devices); default: the system default input.
        #[arg(long)]
        device: Option<String>,
        /// Print the input devices and exit.
        #[arg(long)]
        list_devices: bool,
        /// Root to create the session in (default: the configured write root).
        #[arg(long)]
        root: Option<PathBuf>,
        /// Provider base URL (default wss://api.openai.com/v1).
        #[arg(long)]
        provider_url: Option<String>,
        /// transcription (dictation) or conversation.
        #[arg(long, default_value = "transcription")]
        mode: String,
        /// openai or local (on-device Whisper); default: the settings' recognition engine.
        #[arg(long)]
        provider: Option<String>,
        /// With --provider local: a catalog model name or a ggml model file.
        #[arg(long)]
        model: Option<String>,
    },
    /// Stream an audio or video file through the dictation pipeline into a new session.
    Transcribe {
        /// WAV, MP3, M4A/AAC, ALAC, FLAC, AIFF, Ogg Vorbis, or the audio of MP4/MOV/MKV.
        file: PathBuf,
        /// Provider base URL (default wss://api.openai.com/v1; ws:// allowed for loopback).
        #[arg(long)]
        provider_url: Option<String>,
        /// Root to create the session in (default: the configured write root).
        #[arg(long)]
        root: Option<PathBuf>,
        /// transcription (dictation) or conversation.
        #[arg(long, default_value = "transcription")]
        mode: String,
        /// Playback speed relative to real time; 0 streams as fast as possible (default: 1
        /// with openai, 0 with local).
        #[arg(long)]
        realtime_factor: Option<f64>,
        /// openai or local (on-device Whisper); default: the settings' recognition engine.
        #[arg(long)]
        provider: Option<String>,
        /// With --provider local: a catalog model name or a ggml model file.
        #[arg(long)]
        model: Option<String>,
    },
    /// List sessions under the roots, newest first.
    Sessions {
        /// Session root (repeatable; replaces the configured roots, the first is the write root).
        #[arg(long = "root")]
        roots: Vec<PathBuf>,
        /// Rows per page (1-500).
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u16).range(1..=500))]
        limit: u16,
        /// Continue after the row that printed this cursor.
        #[arg(long)]
        cursor: Option<String>,
        /// Print a JSON array of rows.
        #[arg(long)]
        json: bool,
    },
    /// Find sessions whose surviving text contains QUERY (case-insensitive, literal).
    Search {
        query: String,
        /// Session root (repeatable; replaces the configured roots, the first is the write root).
        #[arg(long = "root")]
        roots: Vec<PathBuf>,
        /// Rows per page (1-500).
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u16).range(1..=500))]
        limit: u16,
        /// Continue after the row that printed this cursor.
        #[arg(long)]
        cursor: Option<String>,
        /// Print a JSON array of rows.
        #[arg(long)]
        json: bool,
    },
    /// Print the effective conversation of a session at a leaf.
    Context {
        /// A session directory or its session.jsonl.
        session: PathBuf,
        /// Entry id of the leaf, or `null` for empty ancestry (default: the last entry).
        #[arg(long)]
        leaf: Option<String>,
        /// Print {"leaf","name","messages":[{"id","entry"}]}.
        #[arg(long)]
        json: bool,
    },
    /// On-device Whisper models: list, download (resumable) or delete.
    Models {
        #[command(subcommand)]
        action: ModelsAction,
    },
    /// Clean up dictated text (stdin, or a session's spoken words) as a dictation would, and
    /// print what would be pasted; nothing is stored.
    Cleanup {
        /// Clean up this session's spoken words (at its default leaf) instead of stdin.
        #[arg(long)]
        session: Option<PathBuf>,
        /// spoken, tidy, polish, email, translate or custom (default: the settings' mode).
        #[arg(long)]
        mode: Option<String>,
        /// Translate's language (default: the settings').
        #[arg(long)]
        language: Option<String>,
        /// The instruction of `--mode custom` (default: the settings').
        #[arg(long)]
        instruction: Option<String>,
        /// The model server's base URL (default: the settings'); it gets only its own key.
        #[arg(long)]
        server: Option<String>,
        /// The model's name (default: the settings').
        #[arg(long)]
        model: Option<String>,
        /// How long to wait for the model, 500-30000 ms (default: the settings' deadline).
        #[arg(long)]
        deadline_ms: Option<u32>,
        /// Print JSON: the text, the verdict, the edits the guard found and its figures.
        #[arg(long)]
        json: bool,
    },
    /// Serve a scripted fake of the OpenAI Realtime API on 127.0.0.1 (for client tests).
    FakeProvider {
        /// Scenario JSON (see tests/scenarios/).
        #[arg(long)]
        scenario: PathBuf,
        /// Port to listen on (0: any free port; the address is printed).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Write every event received and sent as JSONL here when done.
        #[arg(long)]
        dump: Option<PathBuf>,
        /// Keep audio payloads whole in the dump (default: truncated).
        #[arg(long)]
        full_audio: bool,
    },
}

#[derive(Subcommand)]
enum ModelsAction {
    /// The catalog, with what is downloaded, and the models folder.
    List,
    /// Download and verify a catalog model (Ctrl+C stops; run again to resume).
    Download { name: String },
    /// Delete a downloaded model (and any partial download of it).
    Rm { name: String },
}

pub const EXIT_VIOLATION: u8 = 1;
pub const EXIT_CANNOT_RUN: u8 = 2;
pub const EXIT_LEAF_NOT_FOUND: u8 = 3;

/// The command line without any `-psn_…` argument that Finder / LaunchServices may add when it
/// opens the bundle. The program name (the first item) is always kept.
fn without_psn(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut args = args.into_iter();
    let program = args.next();
    program
        .into_iter()
        .chain(args.filter(|a| !a.to_str().is_some_and(|s| s.starts_with("-psn_"))))
        .collect()
}

pub fn run() -> ExitCode {
    let cli = match Cli::try_parse_from(without_psn(std::env::args_os())) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(EXIT_CANNOT_RUN)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    #[cfg(feature = "app")]
    let command = cli.command.unwrap_or(Command::App {
        hidden: false,
        bare: false,
    });
    #[cfg(not(feature = "app"))]
    let Some(command) = cli.command else {
        let _ = <Cli as clap::CommandFactory>::command().print_help();
        return ExitCode::from(EXIT_CANNOT_RUN);
    };
    let code = match command {
        #[cfg(feature = "app")]
        Command::App { hidden, bare } => app(hidden, bare),
        Command::Check { paths, json } => check::run(&paths, json),
        Command::New { root } => store_cmds::new(root.as_deref()),
        Command::Append { session, leaf } => store_cmds::append(&session, leaf.as_deref()),
        Command::Recover { session } => store_cmds::recover(&session),
        Command::Rm { session, yes } => store_cmds::rm(&session, yes),
        Command::Status { session } => store_cmds::status(&session),
        #[cfg(feature = "app")]
        Command::Dictate {
            pre_roll_ms,
            seconds,
            device,
            list_devices,
            root,
            provider_url,
            mode,
            provider,
            model,
        } => {
            let Some(mode) = parse_mode(&mode) else {
                return ExitCode::from(EXIT_CANNOT_RUN);
            };
            dictate::run(dictate::Args {
                provider: provider.as_deref(),
                model: model.as_deref(),
                pre_roll_ms,
                seconds,
                device: device.as_deref(),
                list_devices,
                root: root.as_deref(),
                provider_url: provider_url.as_deref(),
                mode,
            })
        }
        Command::Transcribe {
            file,
            provider_url,
            root,
            mode,
            realtime_factor,
            provider,
            model,
        } => {
            let Some(mode) = parse_mode(&mode) else {
                return ExitCode::from(EXIT_CANNOT_RUN);
            };
            transcribe::run(transcribe::Args {
                provider: provider.as_deref(),
                model: model.as_deref(),
                file: &file,
                provider_url: provider_url.as_deref(),
                root: root.as_deref(),
                mode,
                realtime_factor,
            })
        }
        Command::Sessions {
            roots,
            limit,
            cursor,
            json,
        } => search_cmds::sessions(&search_cmds::Request {
            roots: &roots,
            limit: usize::from(limit),
            cursor: cursor.as_deref(),
            json,
        }),
        Command::Search {
            query,
            roots,
            limit,
            cursor,
            json,
        } => search_cmds::search(
            &query,
            &search_cmds::Request {
                roots: &roots,
                limit: usize::from(limit),
                cursor: cursor.as_deref(),
                json,
            },
        ),
        Command::Context {
            session,
            leaf,
            json,
        } => context::run(&session, leaf.as_deref(), json),
        Command::Models { action } => match action {
            ModelsAction::List => models::list(),
            ModelsAction::Download { name } => models::download(&name),
            ModelsAction::Rm { name } => models::rm(&name),
        },
        Command::Cleanup {
            session,
            mode,
            language,
            instruction,
            server,
            model,
            deadline_ms,
            json,
        } => cleanup::run(cleanup::Args {
            session: session.as_deref(),
            mode: mode.as_deref(),
            language: language.as_deref(),
            instruction: instruction.as_deref(),
            server: server.as_deref(),
            model: model.as_deref(),
            deadline_ms,
            json,
        }),
        Command::FakeProvider {
            scenario,
            port,
            dump,
            full_audio,
        } => fake_cmd::run(&scenario, port, dump.as_deref(), full_audio),
    };
    let _ = std::io::stdout().flush();
    ExitCode::from(code)
}

#[cfg(feature = "app")]
fn app(hidden: bool, bare: bool) -> u8 {
    let result = if bare {
        persyk::app::run_bare()
    } else {
        persyk::app::run(persyk::app::shell::ShellOptions {
            hidden,
            play_sounds: true,
            ..Default::default()
        })
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("persyk: {e}");
            EXIT_CANNOT_RUN
        }
    }
}

fn parse_mode(mode: &str) -> Option<persyk::realtime::protocol::Mode> {
    match mode {
        "transcription" | "dictation" => Some(persyk::realtime::protocol::Mode::Transcription),
        "conversation" => Some(persyk::realtime::protocol::Mode::Conversation),
        _ => {
            eprintln!("persyk: --mode is transcription or conversation");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn psn_arguments_are_dropped_and_nothing_else() {
        assert_eq!(without_psn(os(&["persyk", "-psn_0_4242"])), os(&["persyk"]));
        assert_eq!(
            without_psn(os(&["persyk", "-psn_0_4242", "check", "a", "-psn_1_2"])),
            os(&["persyk", "check", "a"])
        );
        // Near misses stay, and so does the program name whatever it is.
        assert_eq!(
            without_psn(os(&["-psn_0_1", "-psn", "--psn_0_1", "psn_0_1"])),
            os(&["-psn_0_1", "-psn", "--psn_0_1", "psn_0_1"])
        );
        assert!(without_psn(Vec::new()).is_empty());
    }

    #[test]
    fn a_psn_argument_alone_parses_as_no_command() {
        // Without the filter clap rejects `-psn_0_4242` as an unknown argument.
        assert!(Cli::try_parse_from(os(&["persyk", "-psn_0_4242"])).is_err());
        let cli = Cli::try_parse_from(without_psn(os(&["persyk", "-psn_0_4242"])))
            .expect("parses once filtered");
        assert!(cli.command.is_none(), "no command: the app starts");
        let cli = Cli::try_parse_from(without_psn(os(&["persyk", "-psn_0_4242", "check", "x"])))
            .expect("parses once filtered");
        assert!(matches!(cli.command, Some(Command::Check { .. })));
    }
}
