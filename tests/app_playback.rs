//! Playback in history (issue #24 item 8), headless with egui_kittest against the real
//! backend: a session with one recording and three messages, each with its audio block on its
//! own stretch of the WAV, is opened from the Search page; a message's "Play" asks the player
//! for exactly the samples of that message's range (checked against an independent hound read
//! of the WAV), its button reads "Stop playback" while it plays, and Stop stops it; "Play
//! recording" plays every sample; only one playback at a time; closing the session or
//! starting a dictation stops it; a missing WAV is a sentence. A real dictation with client
//! turns (against the fake provider) plays exactly the capture bytes its `replay.audio`
//! names. The player is a recorder in place of the output device (tests/playback_pulse.rs
//! plays through a real one).
#![cfg(feature = "app")]

mod app_support;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use app_support::ui::UiApp;
use app_support::{fixture, one_utterance};
use eframe::egui::accesskit::Role;
use egui_kittest::kittest::Queryable;
use persyk::app::playback::{Player, PlayerState};
use persyk::app::ui::Page;
use persyk::session::format::{
    AssetRef, Block, ByteRange, EntryBody, Message, MsRange, Outcome, RecordingFinished,
    RecordingStarted, Role as MessageRole,
};
use persyk::session::store::{Roots, new_id};
use persyk::session::{LeafSelector, Store};

const RATE: u32 = 24_000;

/// The messages' ranges (ms) in the recording, and their words.
const MESSAGES: [(u64, u64, &str); 3] = [
    (0, 1_000, "first words"),
    (1_000, 2_500, "second words"),
    (2_500, 4_000, "third words"),
];

/// What the window asked the player to do.
#[derive(Debug, Default)]
struct Asked {
    played: Vec<(Vec<i16>, u32)>,
    stops: usize,
    /// Playing now (until a stop, or until the test ends it as if it played out).
    playing: bool,
}

/// A player that plays nothing and records what it was asked.
#[derive(Clone, Default)]
struct FakePlayer(Arc<Mutex<Asked>>);

impl FakePlayer {
    fn asked(&self) -> std::sync::MutexGuard<'_, Asked> {
        self.0.lock().unwrap()
    }
}

impl Player for FakePlayer {
    fn play(&mut self, samples: Vec<i16>, sample_rate: u32) {
        let mut a = self.asked();
        a.played.push((samples, sample_rate));
        a.playing = true;
    }
    fn stop(&mut self) {
        let mut a = self.asked();
        a.stops += 1;
        a.playing = false;
    }
    fn state(&self) -> PlayerState {
        let a = self.asked();
        match a.played.last() {
            Some((s, rate)) if a.playing => PlayerState::Playing {
                position_ms: 0,
                length_ms: s.len() as u64 * 1000 / u64::from(*rate),
            },
            _ => PlayerState::Idle,
        }
    }
}

/// A 4 s recording, a different tone per message, written the way the pipeline and the
/// on-device engine write it: `recording.started`, the WAV, user messages `[audio, text]` on
/// their ranges, `recording.finished`. Returns the session folder and the WAV's path.
fn write_session(root: &Path) -> (PathBuf, PathBuf) {
    let store = Store::new(Roots::explicit(root.to_path_buf(), Vec::new()).unwrap());
    let handle = store.create_session().unwrap();
    let mut c = handle.continuation(&LeafSelector::Default).unwrap();
    let recording_id = new_id();
    let asset = format!("{recording_id}.wav");
    c.append_one(EntryBody::RecordingStarted(RecordingStarted {
        recording_id: recording_id.clone(),
        asset: format!("assets/{asset}"),
    }))
    .unwrap();
    let mut wav = std::io::Cursor::new(Vec::new());
    {
        let spec = hound::WavSpec {
            channels: 1,
            sample_rate: RATE,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let mut w = hound::WavWriter::new(&mut wav, spec).unwrap();
        for (n, (start, end, _)) in MESSAGES.iter().enumerate() {
            let hz = 300.0 + 200.0 * n as f64;
            for i in start * 24..end * 24 {
                let t = i as f64 / f64::from(RATE);
                w.write_sample(((t * hz * std::f64::consts::TAU).sin() * 6_000.0) as i16)
                    .unwrap();
            }
        }
        w.finalize().unwrap();
    }
    handle
        .write_asset(&asset, wav.get_ref(), "audio/wav", None)
        .unwrap();
    let now = 1_764_000_000_000;
    for (i, (start_ms, end_ms, text)) in MESSAGES.into_iter().enumerate() {
        let block = Block::Audio {
            asset: AssetRef::Available {
                path: format!("assets/{asset}"),
                mime_type: "audio/wav".into(),
                byte_range: Some(ByteRange {
                    start: 44 + start_ms * 48,
                    end: 44 + end_ms * 48,
                }),
                encoding: Some("pcm_s16le".into()),
                sha256: None,
            },
            recording_id: Some(recording_id.clone()),
            range: Some(MsRange { start_ms, end_ms }),
        };
        let content = vec![block, Block::Text { text: text.into() }];
        let message = Message::new(MessageRole::User, content, now + i as u64 * 1_000);
        c.append_one(EntryBody::Message(message)).unwrap();
    }
    c.append_one(EntryBody::RecordingFinished(RecordingFinished {
        recording_id,
        duration_ms: 4_000,
        outcome: Outcome::Complete,
        gaps: None,
    }))
    .unwrap();
    let dir = handle.dir().to_path_buf();
    let wav = dir.join("assets").join(asset);
    (dir, wav)
}

/// Every sample of `wav`, read with hound (independently of the app's reader).
fn hound_samples(wav: &Path) -> Vec<i16> {
    hound::WavReader::open(wav)
        .unwrap()
        .into_samples::<i16>()
        .collect::<Result<_, _>>()
        .unwrap()
}

impl UiApp {
    /// The Search page, the one session opened.
    fn open_the_session(&mut self) {
        self.harness.state_mut().show_page(Page::Search);
        self.wait_until("the session's row", |h| {
            h.query_all_by_role_and_label(Role::Button, "Open")
                .next()
                .is_some()
        });
        self.click("Open");
        self.wait_until("the opened session's messages", |h| {
            h.query_all_by_role_and_label(Role::Button, "Play").count() == MESSAGES.len()
        });
    }

    fn wait_played(&mut self, player: &FakePlayer, n: usize) {
        let p = player.clone();
        self.wait_until("the samples to play", move |_| p.asked().played.len() == n);
    }
}

fn app_with(player: &FakePlayer) -> (UiApp, PathBuf, PathBuf) {
    let mut f = fixture(
        Some(one_utterance("playback", "hello there")),
        Some("sk-test"),
        1.0,
        |_| {},
    );
    f.ui.set_player(Box::new(player.clone()));
    let (session, wav) = write_session(&f.root);
    (UiApp::new(f, 640.0, 900.0), session, wav)
}

#[test]
fn a_message_plays_exactly_its_range_and_stop_playback_stops_it() {
    let player = FakePlayer::default();
    let (mut app, _session, wav) = app_with(&player);
    let all = hound_samples(&wav);
    assert_eq!(all.len(), 4 * RATE as usize);
    app.open_the_session();
    assert_eq!(app.buttons("Play recording"), 1);
    assert_eq!(app.buttons("Stop playback"), 0);

    // The second message: 1.0–2.5 s, exactly samples 24 000..60 000.
    app.click_nth(Role::Button, "Play", 1);
    app.wait_played(&player, 1);
    {
        let asked = player.asked();
        let (samples, rate) = &asked.played[0];
        assert_eq!(*rate, RATE);
        assert_eq!(samples.len(), 36_000);
        assert!(
            samples[..] == all[24_000..60_000],
            "not the message's samples"
        );
    }
    app.wait_label("Stop playback");
    // Its own button reads "Stop playback"; the other messages still offer Play.
    assert_eq!(app.buttons("Stop playback"), 1);
    assert_eq!(app.buttons("Play"), 2);
    assert!(app.harness.state().is_playing());
    // Its position beside it (the recorder says 0 ms of 1.5 s).
    assert!(app.has_label("0:00 / 0:01"));

    app.click("Stop playback");
    assert_eq!(player.asked().stops, 1);
    assert!(!player.asked().playing);
    assert_eq!(app.buttons("Stop playback"), 0);
    assert_eq!(app.buttons("Play"), 3);
    assert!(!app.harness.state().is_playing());
    app.shutdown();
}

#[test]
fn one_playback_at_a_time_and_what_ends_it() {
    let player = FakePlayer::default();
    let (mut app, _session, wav) = app_with(&player);
    let all = hound_samples(&wav);
    app.open_the_session();

    // The whole recording: every sample.
    app.click("Play recording");
    app.wait_played(&player, 1);
    assert!(player.asked().played[0].0 == all, "not the whole recording");
    app.wait_label("Stop playback");

    // Another Play stops the first: one playback at a time.
    app.click_nth(Role::Button, "Play", 2);
    app.wait_played(&player, 2);
    assert!(
        player.asked().played[1].0[..] == all[60_000..],
        "not the third message"
    );
    assert!(player.asked().stops >= 1);
    app.wait_until("the recording's Play again", |h| {
        h.query_all_by_role_and_label(Role::Button, "Play recording")
            .count()
            == 1
    });
    assert_eq!(app.buttons("Stop playback"), 1);

    // Played to its end: the button is Play again.
    player.asked().playing = false;
    app.wait_until("the end of playback", |h| {
        h.query_all_by_role_and_label(Role::Button, "Stop playback")
            .count()
            == 0
    });
    assert_eq!(app.buttons("Play"), 3);

    // Closing the session stops playback.
    app.click_nth(Role::Button, "Play", 0);
    app.wait_played(&player, 3);
    app.wait_label("Stop playback");
    let stops = player.asked().stops;
    app.click("Back to results");
    assert_eq!(player.asked().stops, stops + 1);
    assert!(!app.harness.state().is_playing());

    // Starting a dictation stops playback.
    app.click("Open");
    app.wait_until("the opened session again", |h| {
        h.query_all_by_role_and_label(Role::Button, "Play").count() == 3
    });
    app.click_nth(Role::Button, "Play", 0);
    app.wait_played(&player, 4);
    app.wait_label("Stop playback");
    let stops = player.asked().stops;
    app.harness.state_mut().start();
    app.harness.step();
    assert_eq!(player.asked().stops, stops + 1);
    assert!(!app.harness.state().is_playing());
    app.wait_until("the recording to run", |h| h.state().is_recording());
    app.harness.state_mut().stop();
    app.wait_until("the recording to end", |h| !h.state().is_recording());
    app.shutdown();
}

#[test]
fn a_recording_whose_file_is_gone_says_so_in_a_sentence() {
    let player = FakePlayer::default();
    let (mut app, _session, wav) = app_with(&player);
    app.open_the_session();
    std::fs::remove_file(&wav).unwrap();
    app.click_nth(Role::Button, "Play", 0);
    app.wait_label("its audio file is no longer there");
    assert!(player.asked().played.is_empty());
    assert_eq!(app.buttons("Stop playback"), 0);
    assert_eq!(app.buttons("Play"), 3);
    app.shutdown();
}

/// A dictation with client turns (the default model, here against the fake provider): the
/// message's `replay.audio` names the capture bytes its commit covered, and its Play plays
/// exactly those samples of the recording's WAV.
#[test]
fn a_dictated_message_plays_the_audio_its_turn_committed() {
    let player = FakePlayer::default();
    let scenario = app_support::scenario(
        r#"{"name": "client-turns", "connections": [{
            "utterances": [{"end_ms": 1, "transcript": "Please send the report.", "delay_ms": 50}],
            "close_after_commit_ms": 400}]}"#,
    );
    let mut f = fixture(Some(scenario), Some("sk-test"), 2.0, |s| {
        s.provider.transcription_model = Some("gpt-live-transcribe".into());
    });
    f.ui.set_player(Box::new(player.clone()));
    let mut app = UiApp::new(f, 640.0, 900.0);
    app.click("Start dictation");
    app.wait_label("Please send the report.");
    app.wait_until("the recording to end", |h| !h.state().is_recording());

    // What the session says, read independently: the message's replay range and the WAV.
    let session = std::fs::read_dir(&app.root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.join("session.jsonl").is_file())
        .expect("the dictation's session");
    let lines = std::fs::read_to_string(session.join("session.jsonl")).unwrap();
    let audio = lines
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find_map(|v| {
            let a = &v["message"]["replay"]["audio"];
            a.is_object().then(|| a.clone())
        })
        .expect("a message with replay.audio");
    let wav = session.join(audio["path"].as_str().unwrap());
    let (start, end) = (
        audio["byteRange"]["start"].as_u64().unwrap(),
        audio["byteRange"]["end"].as_u64().unwrap(),
    );
    let all = hound_samples(&wav);
    let expected = &all[(start as usize - 44) / 2..(end as usize - 44) / 2];
    assert!(expected.len() >= 2_400, "a turn of at least 100 ms");

    app.harness.state_mut().show_page(Page::Search);
    app.wait_until("the session's row", |h| {
        h.query_all_by_role_and_label(Role::Button, "Open")
            .next()
            .is_some()
    });
    app.click("Open");
    app.wait_until("the message's Play", |h| {
        h.query_all_by_role_and_label(Role::Button, "Play").count() == 1
    });
    assert_eq!(app.buttons("Play recording"), 1);
    app.click("Play");
    app.wait_played(&player, 1);
    let asked = player.asked();
    assert_eq!(asked.played[0].1, RATE);
    assert!(asked.played[0].0[..] == *expected, "not the turn's samples");
    drop(asked);
    app.shutdown();
}
