//! The microphone's real-time callback path allocates nothing.
//!
//! A counting `#[global_allocator]` (this test binary's own) counts every allocation made on
//! the calling thread while counting is switched on. The test drives the very functions the
//! cpal input stream calls — [`InputCallback::on_data`] for data and [`InputErrors::on_error`]
//! for a processor overload (`Xrun`) — with synthetic buffers in the sample formats devices
//! deliver, and requires zero allocations, while the frames still arrive, all of them, at
//! the other end of the link.

#![cfg(feature = "app")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::mpsc::sync_channel;
use std::time::Duration;

use persyk::capture::source::{
    EVENT_QUEUE_DEPTH, InputCallback, InputErrors, InputLink, SourceEvent, SourceFormat,
};

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn note_allocation() {
    let _ = COUNTING.try_with(|on| {
        if on.get() {
            let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        }
    });
}

// SAFETY: every call is forwarded unchanged to the system allocator; the bookkeeping only
// touches const-initialized thread-locals without destructors (no allocation, no re-entry).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        // SAFETY: same contract as ours.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_allocation();
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Allocations made on this thread while running `f`.
fn allocations_in(f: impl FnOnce()) -> u64 {
    ALLOCATIONS.with(|n| n.set(0));
    COUNTING.with(|on| on.set(true));
    f();
    COUNTING.with(|on| on.set(false));
    ALLOCATIONS.with(Cell::get)
}

/// 20 ms at 48 kHz.
const FRAMES_PER_BUFFER: usize = 960;
const BUFFERS_PER_ROUND: usize = 10;
const ROUNDS: usize = 30;

fn drive<T>(callback: &mut InputCallback, errors: &InputErrors, buffer: &[T], with_overload: bool)
where
    T: cpal::SizedSample,
    f32: cpal::FromSample<T>,
{
    let overload = cpal::Error::new(cpal::ErrorKind::Xrun);
    for _ in 0..BUFFERS_PER_ROUND {
        let n = allocations_in(|| {
            callback.on_data(buffer);
            if with_overload {
                errors.on_error(&overload);
            }
        });
        assert_eq!(n, 0, "the callback path allocated {n} time(s)");
    }
}

#[test]
fn the_input_callback_allocates_nothing_and_delivers_every_frame() {
    let format = SourceFormat {
        rate_hz: 48_000,
        channels: 2,
    };
    let channels = usize::from(format.channels);
    let (tx, rx) = sync_channel(EVENT_QUEUE_DEPTH);
    let (mut link, mut callback) = InputLink::start(format, tx).expect("link");
    let errors = callback.errors();
    let f32_buffer: Vec<f32> = (0..FRAMES_PER_BUFFER * channels)
        .map(|i| (i as f32 * 0.01).sin() * 0.5)
        .collect();
    let i16_buffer: Vec<i16> = f32_buffer.iter().map(|&s| (s * 16_000.0) as i16).collect();
    let i32_buffer: Vec<i32> = i16_buffer.iter().map(|&s| i32::from(s) << 16).collect();
    for round in 0..ROUNDS {
        // Every third round also reports an overload after each buffer.
        let overload = round % 3 == 0;
        match round % 3 {
            0 => drive(&mut callback, &errors, &f32_buffer, overload),
            1 => drive(&mut callback, &errors, &i16_buffer, overload),
            _ => drive(&mut callback, &errors, &i32_buffer, overload),
        }
        // Off the callback path: what was pushed arrives, before overload counts or after.
        let mut got = 0;
        while got < FRAMES_PER_BUFFER * BUFFERS_PER_ROUND {
            match rx.recv_timeout(Duration::from_secs(10)) {
                Ok(SourceEvent::Frames(f)) => got += f.len() / channels,
                Ok(SourceEvent::Error(e)) => {
                    assert_eq!(e.code(), "capture.input-overload", "no loss: {e}");
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(got, FRAMES_PER_BUFFER * BUFFERS_PER_ROUND, "round {round}");
    }
    drop((callback, errors));
    link.stop();
    // After stop the link has dropped its sender: the channel drains and disconnects.
    while let Ok(event) = rx.recv_timeout(Duration::from_secs(10)) {
        assert!(
            matches!(event, SourceEvent::Error(ref e) if e.code() == "capture.input-overload"),
            "{event:?}"
        );
    }
}
