//! Files transcribed in the app (issue #38): a queue worked one file at a time, on the
//! device, each into a session of its own, beside dictation.
//!
//! Invariants:
//! - A file never waits on the window: it is decoded and recognized off the UI thread, and
//!   the window reads its [`FileProgress`] (atomics) each frame.
//! - A dictation takes the recognizer first: while one records, the file's recognizer
//!   finishes the window in hand and starts no other (the engine's hold,
//!   [`crate::local::dictation::LocalSetup::hold`]; the decoder waits too, [`Tracked`]), and
//!   it resumes where it was after the dictation ends. The time held is left out of the
//!   estimate and out of the stop's drain deadline, so a file is never cut short by a
//!   dictation, however long.
//! - A file's stop waits while recognition goes on ([`crate::local::dictation::FILE_DRAIN_DEADLINE`]
//!   without a window finished is the only limit).
//! - Cancel keeps what was recognized and waits for nothing else: the window being
//!   recognized is abandoned, the audio read but not recognized is a `local.cancelled` gap and
//!   the audio not read a `capture.cancelled` one
//!   ([`crate::pipeline::RecordOptions::stop_cancels`]); the session is incomplete.
//! - A file that cannot start (unreadable, an unsupported codec, no model) leaves no session:
//!   its reason reaches the window, and the next file starts.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::watch;

use super::{Backend, Finished, Update, finished_from};
use crate::app::model::{FileDone, FileProgress};
use crate::capture::source::{AudioSource, SourceError, SourceEvent, SourceFormat};
use crate::pipeline::{self, RecordOptions, SourceKind};
use crate::session::LeafSelector;

/// A file being transcribed.
pub(super) struct FileJob {
    pub(super) progress: Arc<FileProgress>,
    stop: watch::Sender<bool>,
    cancelled: Arc<AtomicBool>,
    pub(super) task: tokio::task::JoinHandle<Finished>,
    /// Kept so the recording's removal queue stays open (a file's messages are removed from
    /// history, not while it is transcribed).
    _removals: tokio::sync::mpsc::Sender<pipeline::RemovalRequest>,
    /// Since when a dictation holds it.
    held_since: Option<std::time::Instant>,
}

/// The files waiting, and the one in hand.
#[derive(Default)]
pub(super) struct Files {
    pub(super) waiting: VecDeque<PathBuf>,
    pub(super) job: Option<FileJob>,
}

/// Resolves when the file in hand is done (never, without one).
pub(super) async fn file_done(job: &mut Option<FileJob>) -> (Finished, bool, Arc<FileProgress>) {
    match job {
        Some(j) => {
            let finished = (&mut j.task).await.unwrap_or_else(|_| Finished {
                error: Some("app.task-failed".into()),
                ..finished_from(PathBuf::new(), Err(pipeline::CaptureError::WavWrite))
            });
            (
                finished,
                j.cancelled.load(Ordering::SeqCst),
                j.progress.clone(),
            )
        }
        None => std::future::pending().await,
    }
}

fn name_of(path: &std::path::Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

impl FileJob {
    /// Holds the file back (a dictation has the recognizer) or lets it go on; the time held
    /// is counted for the estimate.
    fn hold(&mut self, hold: bool) {
        self.progress.paused.store(hold, Ordering::SeqCst);
        match (hold, self.held_since) {
            (true, None) => self.held_since = Some(std::time::Instant::now()),
            (false, Some(since)) => {
                self.held_since = None;
                let ms = u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX);
                self.progress.paused_ms.fetch_add(ms, Ordering::Relaxed);
            }
            _ => {}
        }
    }
}

impl Backend {
    /// Queues `files` and starts the first when nothing is in hand.
    pub(super) async fn queue_files(&mut self, files: Vec<PathBuf>) {
        self.files.waiting.extend(files);
        self.next_file().await;
    }

    /// Starts the next waiting file when none is in hand; a file that cannot start is
    /// reported and the one after it is tried.
    pub(super) async fn next_file(&mut self) {
        while self.files.job.is_none() {
            let Some(path) = self.files.waiting.pop_front() else {
                break;
            };
            // The window shows what waits no later than the file that starts.
            self.send_waiting().await;
            if let Err(reason) = self.start_file(path.clone()).await {
                eprintln!(
                    "persyk: a file could not be transcribed: {}",
                    code_of(&reason)
                );
                let finished = finished_from(PathBuf::new(), Err(pipeline::CaptureError::WavWrite));
                self.notifier()
                    .send(Update::FileEnded(Box::new(FileDone {
                        name: name_of(&path),
                        finished,
                        cancelled: false,
                        refused: Some(reason),
                    })))
                    .await;
            }
        }
        self.send_waiting().await;
    }

    async fn send_waiting(&mut self) {
        let names = self.files.waiting.iter().map(|p| name_of(p)).collect();
        self.notifier().send(Update::FilesWaiting { names }).await;
    }

    /// Stops the file in hand (its words so far are kept).
    pub(super) fn cancel_file(&mut self) {
        if let Some(job) = &mut self.files.job {
            job.cancelled.store(true, Ordering::SeqCst);
            job.hold(false);
            let _ = job.stop.send(true);
        }
    }

    /// A dictation started or ended: the file waits for it, then goes on.
    pub(super) fn hold_file(&mut self, hold: bool) {
        if let Some(job) = &mut self.files.job {
            job.hold(hold);
        }
    }

    async fn start_file(&mut self, path: PathBuf) -> Result<(), String> {
        let name = name_of(&path);
        // Files are recognized on the device, whatever engine dictation uses.
        let mut recognition = self
            .local_recognition(crate::local::dictation::FILE_DRAIN_DEADLINE)
            .await?;
        let open = path.clone();
        let source = tokio::task::spawn_blocking(move || crate::capture::open_file(&open, 0.0))
            .await
            .map_err(|_| "app.task-failed".to_owned())?
            .map_err(|e| e.to_string())?;
        let store = self.store()?;
        // Which Mac transcribed it and which file it was (its name only), before the audio.
        let device = crate::sync::Device::this(&self.settings)
            .inspect_err(|e| eprintln!("persyk: {}: the session will not name this Mac", e.code()))
            .ok();
        let named = path.clone();
        let (handle, continuation) = tokio::task::spawn_blocking(move || {
            let handle = store.create_session()?;
            let mut continuation = handle.continuation(&LeafSelector::Default)?;
            if let Some(device) = device {
                // The marker that keeps other Macs from writing to it while it records.
                crate::sync::claim_recording(&mut continuation, &device)?;
                continuation.append_one(device.entry())?;
            }
            continuation.append_one(pipeline::source_file_entry(&named))?;
            Ok::<_, crate::session::StoreError>((handle, continuation))
        })
        .await
        .map_err(|_| "app.task-failed".to_owned())?
        .map_err(|e| e.code().to_owned())?;
        let progress = Arc::new(FileProgress::new(name));
        progress
            .rate_hz
            .store(source.format().rate_hz, Ordering::Relaxed);
        progress
            .total
            .store(source.len_frames().unwrap_or(0), Ordering::Relaxed);
        // A dictation running now has the recognizer first (set before anything starts).
        let held = self.active.is_some();
        progress.paused.store(held, Ordering::SeqCst);
        // The file's recognizer waits while a dictation has the recognizer.
        if let pipeline::Recognition::Local(setup) = &mut recognition {
            setup.hold = Some(progress.paused.clone());
        }
        let tracked = Tracked {
            inner: source,
            progress: progress.clone(),
            forward: None,
        };
        let (stop, stop_rx) = watch::channel(false);
        let dir = handle.dir().to_path_buf();
        // The engine's view says how far recognition has got: the bar follows it.
        let (view_tx, view_rx) = tokio::sync::oneshot::channel();
        let (removals, removal_rx) = tokio::sync::mpsc::channel(1);
        let tap = pipeline::LiveTap {
            view: view_tx,
            level: Arc::new(std::sync::atomic::AtomicU32::new(0)),
            removals: removal_rx,
        };
        let follow = progress.clone();
        tokio::spawn(async move {
            let Ok(mut view) = view_rx.await else {
                return;
            };
            loop {
                let heard = view.borrow_and_update().heard_ms;
                follow.heard_ms.store(heard, Ordering::Relaxed);
                if view.changed().await.is_err() {
                    break;
                }
            }
        });
        let task = tokio::spawn(async move {
            let options = RecordOptions {
                tap: Some(tap),
                stop_cancels: true,
                ..RecordOptions::default()
            };
            let result = pipeline::record_to(
                continuation,
                recognition,
                Box::new(tracked),
                SourceKind::Replay,
                stop_rx,
                options,
            )
            .await;
            finished_from(dir, result)
        });
        self.files.job = Some(FileJob {
            progress: progress.clone(),
            stop,
            cancelled: Arc::new(AtomicBool::new(false)),
            task,
            _removals: removals,
            held_since: held.then(std::time::Instant::now),
        });
        self.notifier().send(Update::FileStarted { progress }).await;
        Ok(())
    }

    /// The file in hand ended: the window hears it, a long one gets a notification, and the
    /// next file starts.
    pub(super) async fn file_ended(
        &mut self,
        finished: Finished,
        cancelled: bool,
        progress: Arc<FileProgress>,
    ) {
        self.files.job = None;
        self.notifier()
            .send(Update::FileEnded(Box::new(FileDone {
                name: progress.name.clone(),
                // A file that reached its end before the cancel took effect is complete.
                cancelled: cancelled && !finished.complete,
                finished,
                refused: None,
            })))
            .await;
        self.next_file().await;
    }

    /// Quitting: the waiting files are dropped and the file in hand is told to stop where it
    /// is (kept, with its gap); the caller waits for its task within the quit deadline.
    pub(super) fn stop_files(&mut self) -> Option<FileJob> {
        self.files.waiting.clear();
        let mut job = self.files.job.take()?;
        job.cancelled.store(true, Ordering::SeqCst);
        job.hold(false);
        let _ = job.stop.send(true);
        Some(job)
    }
}

/// The code at the start of a reason ("capture.unsupported-codec: …").
fn code_of(reason: &str) -> &str {
    reason.split(':').next().unwrap_or(reason)
}

/// A file's source that counts what it hands on and holds it back while a dictation runs.
struct Tracked {
    inner: Box<dyn AudioSource>,
    progress: Arc<FileProgress>,
    forward: Option<JoinHandle<()>>,
}

impl AudioSource for Tracked {
    fn format(&self) -> SourceFormat {
        self.inner.format()
    }

    fn len_frames(&self) -> Option<u64> {
        self.inner.len_frames()
    }

    fn start(&mut self, events: SyncSender<SourceEvent>) -> Result<(), SourceError> {
        let (tx, rx) = sync_channel(crate::capture::source::EVENT_QUEUE_DEPTH);
        self.inner.start(tx)?;
        let progress = self.progress.clone();
        let channels = u64::from(self.inner.format().channels.max(1));
        let forward = std::thread::Builder::new()
            .name("persyk-file-progress".into())
            .spawn(move || {
                for event in rx {
                    // Held back while a dictation has the recognizer (the time is counted
                    // by whoever holds it).
                    while progress.paused.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    let frames = match &event {
                        SourceEvent::Frames(f) => f.len() as u64 / channels,
                        _ => 0,
                    };
                    if events.send(event).is_err() {
                        return;
                    }
                    progress.done.fetch_add(frames, Ordering::Relaxed);
                }
            })
            .map_err(|_| SourceError::StreamFailed {
                detail: "thread-spawn",
            })?;
        self.forward = Some(forward);
        Ok(())
    }

    fn stop(&mut self) {
        self.inner.stop();
        if let Some(f) = self.forward.take() {
            let _ = f.join();
        }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.stop();
    }
}
