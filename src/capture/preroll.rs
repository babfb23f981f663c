//! Pre-roll: keep the input warm and start each recording up to 500 ms *before* the click,
//! so the first word is not lost to a microphone that opens late.
//!
//! [`WarmInput`] runs a source continuously and keeps only its most recent `window` of
//! frames in a ring (bounded: nothing older is retained, nothing is written anywhere while
//! idle). [`WarmInput::recording_source`] hands out an [`AudioSource`] whose first event is
//! that ring, followed by the live frames, contiguous, until it is stopped; then the input
//! returns to idle.
//!
//! Invariants:
//! - At most [`MAX_PRE_ROLL`] of audio is ever held while idle.
//! - Frames reach exactly one place: the ring while idle, the recording while recording.

use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use super::source::{AudioSource, EVENT_QUEUE_DEPTH, SourceError, SourceEvent, SourceFormat};

/// The longest pre-roll.
pub const MAX_PRE_ROLL: Duration = Duration::from_millis(500);

struct Shared {
    ring: VecDeque<f32>,
    capacity: usize,
    target: Option<SyncSender<SourceEvent>>,
}

fn lock(m: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A source kept running between recordings, remembering its last moments.
pub struct WarmInput {
    format: SourceFormat,
    shared: Arc<Mutex<Shared>>,
    source: Box<dyn AudioSource>,
    forwarder: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for WarmInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WarmInput")
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

impl WarmInput {
    /// Starts `source` and keeps its last `window` (clamped to [`MAX_PRE_ROLL`]).
    pub fn start(
        mut source: Box<dyn AudioSource>,
        window: Duration,
    ) -> Result<WarmInput, SourceError> {
        let format = source.format();
        let window = window.min(MAX_PRE_ROLL);
        let capacity = (window.as_secs_f64() * f64::from(format.rate_hz)) as usize
            * usize::from(format.channels.max(1));
        let shared = Arc::new(Mutex::new(Shared {
            ring: VecDeque::with_capacity(capacity),
            capacity,
            target: None,
        }));
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
        Ok(WarmInput {
            format,
            shared,
            source,
            forwarder: Some(forwarder),
        })
    }

    /// The audio held right now (interleaved frames), for display or tests.
    pub fn held_frames(&self) -> usize {
        lock(&self.shared).ring.len() / usize::from(self.format.channels.max(1))
    }

    /// A source for one recording: the held pre-roll first, then live frames.
    pub fn recording_source(&self) -> PreRollSource {
        PreRollSource {
            format: self.format,
            shared: self.shared.clone(),
        }
    }

    /// Stops the underlying source.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.source.stop();
        lock(&self.shared).target = None;
        if let Some(f) = self.forwarder.take() {
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
    // The source ended: a recording in progress sees its channel close.
    lock(shared).target = None;
}

/// One recording's view of a [`WarmInput`].
#[derive(Clone)]
pub struct PreRollSource {
    format: SourceFormat,
    shared: Arc<Mutex<Shared>>,
}

impl AudioSource for PreRollSource {
    fn format(&self) -> SourceFormat {
        self.format
    }

    fn start(&mut self, events: SyncSender<SourceEvent>) -> Result<(), SourceError> {
        let mut s = lock(&self.shared);
        if s.target.is_some() {
            return Err(SourceError::AlreadyStarted);
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
