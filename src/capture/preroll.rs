//! Pre-roll: keep the input warm and start each recording up to 500 ms *before* the click,
//! so the first word is not lost to a microphone that opens late.
//!
//! [`WarmInput`] runs a source continuously and keeps only its most recent `window` of
//! frames in a ring (bounded: nothing older is retained, nothing is written anywhere while
//! idle). [`WarmInput::recording_source`] hands out an [`AudioSource`] whose first event is
//! that ring, followed by the live frames, contiguous, until it is stopped; then the input
//! returns to idle.
//!
//! A warm input can die while nobody records (the device is unplugged or taken away): a
//! fatal error, or the source's channel closing, marks it lost. The next
//! [`WarmInput::recording_source`] then reopens it ([`AudioSource::reopen`]) and records from
//! the fresh input (without pre-roll, which died with the old one); if it cannot be
//! reopened, that recording fails with `capture.device-lost` — the cause, not a silent
//! input blamed on permissions.
//!
//! Invariants:
//! - At most [`MAX_PRE_ROLL`] of audio is ever held while idle.
//! - Frames reach exactly one place: the ring while idle, the recording while recording.
//! - A fatal error is never dropped: while recording it is forwarded, and either way it
//!   marks the input lost so no later recording reuses a dead input.

use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use super::source::{AudioSource, EVENT_QUEUE_DEPTH, SourceError, SourceEvent, SourceFormat};

/// The longest pre-roll.
pub const MAX_PRE_ROLL: Duration = Duration::from_millis(500);

struct Shared {
    format: SourceFormat,
    ring: VecDeque<f32>,
    capacity: usize,
    target: Option<SyncSender<SourceEvent>>,
    /// Why the running input stopped, if it did; the next recording reopens it.
    lost: Option<SourceError>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The running source and the thread that forwards its events.
struct Running {
    source: Box<dyn AudioSource>,
    forwarder: Option<JoinHandle<()>>,
}

/// A source kept running between recordings, remembering its last moments.
pub struct WarmInput {
    window: Duration,
    shared: Arc<Mutex<Shared>>,
    running: Mutex<Running>,
}

impl std::fmt::Debug for WarmInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WarmInput")
            .field("format", &lock(&self.shared).format)
            .finish_non_exhaustive()
    }
}

/// Interleaved samples in `window` of `format`.
fn ring_capacity(format: SourceFormat, window: Duration) -> usize {
    (window.as_secs_f64() * f64::from(format.rate_hz)) as usize
        * usize::from(format.channels.max(1))
}

/// Starts `source` forwarding into `shared`.
fn run(
    mut source: Box<dyn AudioSource>,
    shared: &Arc<Mutex<Shared>>,
) -> Result<Running, SourceError> {
    let (tx, rx) = sync_channel(EVENT_QUEUE_DEPTH);
    source.start(tx)?;
    let forwarder = {
        let shared = shared.clone();
        std::thread::Builder::new()
            .name("persyk-pre-roll".into())
            .spawn(move || forward(&rx, &shared))
            .map_err(|_| SourceError::StreamFailed {
                detail: "thread-spawn",
            })?
    };
    Ok(Running {
        source,
        forwarder: Some(forwarder),
    })
}

impl Running {
    fn stop(&mut self) {
        self.source.stop();
        if let Some(f) = self.forwarder.take() {
            let _ = f.join();
        }
    }
}

impl WarmInput {
    /// Starts `source` and keeps its last `window` (clamped to [`MAX_PRE_ROLL`]).
    pub fn start(source: Box<dyn AudioSource>, window: Duration) -> Result<WarmInput, SourceError> {
        let format = source.format();
        let window = window.min(MAX_PRE_ROLL);
        let capacity = ring_capacity(format, window);
        let shared = Arc::new(Mutex::new(Shared {
            format,
            ring: VecDeque::with_capacity(capacity),
            capacity,
            target: None,
            lost: None,
        }));
        let running = run(source, &shared)?;
        Ok(WarmInput {
            window,
            shared,
            running: Mutex::new(running),
        })
    }

    /// The audio held right now (interleaved frames), for display or tests.
    pub fn held_frames(&self) -> usize {
        let s = lock(&self.shared);
        s.ring.len() / usize::from(s.format.channels.max(1))
    }

    /// Why the input stopped while warm, if it did and was not reopened yet.
    pub fn lost(&self) -> Option<SourceError> {
        lock(&self.shared).lost.clone()
    }

    /// A source for one recording: the held pre-roll first, then live frames. An input
    /// that was lost is reopened first (this may block while the device opens); if that is
    /// impossible, the returned source fails to start with `capture.device-lost`.
    pub fn recording_source(&self) -> PreRollSource {
        let failed = if lock(&self.shared).lost.is_some() {
            self.reopen().err()
        } else {
            None
        };
        PreRollSource {
            format: lock(&self.shared).format,
            shared: self.shared.clone(),
            failed,
        }
    }

    /// Replaces a lost input with a fresh one from [`AudioSource::reopen`].
    fn reopen(&self) -> Result<(), SourceError> {
        let mut running = lock(&self.running);
        let Some(Ok(fresh)) = running.source.reopen() else {
            return Err(SourceError::DeviceLost);
        };
        // The old input's senders go, its forwarder ends; nothing of it is left to race.
        running.stop();
        {
            let mut s = lock(&self.shared);
            let format = fresh.format();
            s.format = format;
            s.capacity = ring_capacity(format, self.window);
            s.ring.clear();
            s.target = None;
            s.lost = None;
        }
        match run(fresh, &self.shared) {
            Ok(fresh) => {
                *running = fresh;
                Ok(())
            }
            Err(_) => {
                lock(&self.shared).lost = Some(SourceError::DeviceLost);
                Err(SourceError::DeviceLost)
            }
        }
    }

    /// Stops the underlying source.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        let mut running = lock(&self.running);
        running.source.stop();
        lock(&self.shared).target = None;
        if let Some(f) = running.forwarder.take() {
            let _ = f.join();
        }
    }
}

impl Drop for WarmInput {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn forward(rx: &Receiver<SourceEvent>, shared: &Mutex<Shared>) {
    while let Ok(event) = rx.recv() {
        let target = {
            let mut s = lock(shared);
            if let SourceEvent::Error(e) = &event
                && e.is_fatal()
            {
                // The device is gone for this input, recording or not.
                s.lost = Some(e.clone());
            }
            match (&s.target, event) {
                (Some(t), event) => Some((t.clone(), event)),
                (None, SourceEvent::Frames(frames)) => {
                    s.ring.extend(frames);
                    let excess = s.ring.len().saturating_sub(s.capacity);
                    s.ring.drain(..excess);
                    None
                }
                (None, _) => None,
            }
        };
        if let Some((t, event)) = target
            && t.send(event).is_err()
        {
            lock(shared).target = None;
        }
    }
    // The source's channel closed: a recording in progress sees its channel close (a
    // failure unless it was stopping), and the input counts as lost.
    let mut s = lock(shared);
    s.target = None;
    s.lost.get_or_insert(SourceError::DeviceLost);
}

/// One recording's view of a [`WarmInput`].
#[derive(Clone)]
pub struct PreRollSource {
    format: SourceFormat,
    shared: Arc<Mutex<Shared>>,
    /// Set when the input was lost and could not be reopened.
    failed: Option<SourceError>,
}

impl AudioSource for PreRollSource {
    fn format(&self) -> SourceFormat {
        self.format
    }

    fn start(&mut self, events: SyncSender<SourceEvent>) -> Result<(), SourceError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let mut s = lock(&self.shared);
        if s.target.is_some() {
            return Err(SourceError::AlreadyStarted);
        }
        if s.lost.is_some() || s.format != self.format {
            // Lost between `recording_source` and now.
            return Err(SourceError::DeviceLost);
        }
        let held: Vec<f32> = s.ring.drain(..).collect();
        if !held.is_empty() {
            events
                .try_send(SourceEvent::Frames(held))
                .map_err(|_| SourceError::StreamFailed {
                    detail: "pre-roll handoff",
                })?;
        }
        s.target = Some(events);
        Ok(())
    }

    fn stop(&mut self) {
        lock(&self.shared).target = None;
    }
}
