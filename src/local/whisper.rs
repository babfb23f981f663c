//! The whisper.cpp engine (whisper-rs): a loaded model and the recognizer that runs it.
//!
//! [`LocalModel::load`] checks the whole file ([`super::check_model_file`]: header, vocabulary,
//! tensor table), then lets whisper.cpp load it (Metal on
//! Apple targets through the crate's `metal` feature). A [`Recognizer`] owns one inference
//! state and recognizes utterances one at a time on whatever thread owns it — the callers
//! give it a thread of its own. A window of audio (up to 30 s) is decoded on its own
//! (`no_context`, and no text carried between whisper.cpp's passes over it), greedy, with
//! whisper.cpp's full encoder window, timestamps on and `single_segment` off, into timed
//! [`Segment`]s that the engine commits and judges ([`super::judge`]). A reduced encoder
//! window (`audio_ctx`) is used only where the engine asks for one ([`Decode::short_window`]:
//! the rest of a live recording after the stop) and only if its result passes
//! [`check::doubt`]; otherwise the audio is decoded again with the full window (whisper.cpp
//! lists `audio_ctx` as an experimental speed-up: with a second of padding tiny.en repeated
//! phrases, see [`check`]). An inference can be abandoned through a flag (`local.aborted`,
//! [`Decode::abort`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Once};

use whisper_rs::{FullParams, SamplingStrategy, WhisperContext, WhisperContextParameters};

use super::dictation::{Decode, Segment};
use super::vocabulary::Vocabulary;
use super::{
    LocalError, LocalOptions, Recognition, Verdict, WHISPER_RATE_HZ, check, check_model_file,
    judge, to_whisper_rate,
};

/// The whisper.cpp version this build carries (for provenance in the session).
pub fn whisper_cpp_version() -> &'static str {
    whisper_rs::WHISPER_CPP_VERSION
}

/// A loaded model; cheap to share between recognizers.
#[derive(Clone)]
pub struct LocalModel {
    context: Arc<WhisperContext>,
    path: PathBuf,
    /// Set once the app quits ([`LocalModel::stop_recognition`]), shared by every clone and
    /// every recognizer made from them.
    quit: Arc<AtomicBool>,
}

/// A handle on a loaded model that does not keep it loaded: whether its memory — and with it
/// whisper.cpp's backend buffers, which its Metal backend asserts were freed when the
/// process exits — has been released (every holder, the app's cache and each recognizer's
/// thread, dropped it), and a way to stop its recognitions ([`LocalModel::stop_recognition`])
/// without holding it.
#[derive(Debug, Clone)]
pub struct ModelWatch {
    context: std::sync::Weak<WhisperContext>,
    quit: Arc<AtomicBool>,
}

impl ModelWatch {
    pub fn is_released(&self) -> bool {
        self.context.strong_count() == 0
    }

    /// As [`LocalModel::stop_recognition`].
    pub fn stop_recognition(&self) {
        self.quit.store(true, Ordering::SeqCst);
    }
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

static QUIET: Once = Once::new();

/// Whether whisper.cpp may use the GPU: Metal on Apple Silicon; the CPU on Intel Macs, whose
/// AMD and Intel GPUs are where whisper.cpp's Metal backend has failed (wrong output, hangs)
/// and where the CPU with AVX is the dependable path (issue #36 item 8). Elsewhere there is
/// no GPU backend built, so the value changes nothing.
const GPU: bool = !cfg!(all(target_os = "macos", target_arch = "x86_64"));

impl LocalModel {
    /// Loads the ggml model at `path`.
    pub fn load(path: &Path) -> Result<LocalModel, LocalError> {
        check_model_file(path)?;
        // whisper.cpp logs every allocation to stderr; route it to nowhere (the crate's
        // hooks drop messages unless a logging backend feature is on).
        QUIET.call_once(whisper_rs::install_logging_hooks);
        let path_str = path.to_str().ok_or(LocalError::ModelUnreadable)?;
        let mut params = WhisperContextParameters::default();
        params.use_gpu(GPU);
        let context = WhisperContext::new_with_params(path_str, params).map_err(|_| {
            LocalError::ModelInvalid(super::ggml::Invalid {
                reason: "whisper.cpp could not load it",
                offset: 0,
            })
        })?;
        Ok(LocalModel {
            context: Arc::new(context),
            path: path.to_owned(),
            quit: Arc::new(AtomicBool::new(false)),
        })
    }

    /// Stops every recognition with this model, for good: an inference running now is
    /// abandoned at whisper.cpp's next abort check (between the compute graph's nodes on the
    /// CPU, after the encoder and each decoder step), and every later one fails at once,
    /// both with `local.quit`, so recognizer threads let go of the model quickly. Called
    /// when the app quits and its deadline is near (issue #36 item 7): whisper.cpp's Metal
    /// backend asserts at exit that its buffers were freed.
    pub fn stop_recognition(&self) {
        self.quit.store(true, Ordering::SeqCst);
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A watch on this model's release that can also stop its recognitions
    /// ([`ModelWatch`]).
    pub fn watch(&self) -> ModelWatch {
        ModelWatch {
            context: Arc::downgrade(&self.context),
            quit: self.quit.clone(),
        }
    }

    /// Whether the model recognizes several languages (`false` for `*.en` models).
    pub fn is_multilingual(&self) -> bool {
        self.context.is_multilingual()
    }

    /// A recognizer with its own inference state.
    pub fn recognizer(&self, mut options: LocalOptions) -> Result<Recognizer, LocalError> {
        // An English-only model has no translate task.
        options.translate &= self.is_multilingual();
        let state = self
            .context
            .create_state()
            .map_err(|_| LocalError::InferenceFailed)?;
        // The vocabulary as prompt tokens, once (whisper.cpp puts them before each window),
        // whole words up to the bound; a word the tokenizer refuses is left out.
        let mut prompt_tokens = Vec::new();
        for piece in options.vocabulary_pieces() {
            let Ok(tokens) = self.context.tokenize(&piece, 512) else {
                continue;
            };
            if prompt_tokens.len() + tokens.len() > crate::local::MAX_VOCABULARY_TOKENS {
                break;
            }
            prompt_tokens.extend(tokens);
        }
        let vocabulary = Vocabulary::new(&options.vocabulary);
        Ok(Recognizer {
            model: self.clone(),
            state,
            options,
            prompt_tokens,
            vocabulary,
            vocabulary_decodes: 0,
            short_windows: ShortWindows::default(),
        })
    }
}

/// One inference state; recognizes one utterance at a time.
pub struct Recognizer {
    /// Declared before `model` so that it is dropped first: the state (and whisper.cpp's
    /// buffers it holds) is freed before the model's [`ModelWatch`] can say released.
    state: whisper_rs::WhisperState,
    /// Keeps the context alive as long as the state.
    model: LocalModel,
    options: LocalOptions,
    /// [`LocalOptions::vocabulary`] tokenized (empty: no prompt).
    prompt_tokens: Vec<whisper_rs::WhisperTokenId>,
    /// The same words for finding where the model misheard one ([`super::vocabulary`]).
    vocabulary: Vocabulary,
    vocabulary_decodes: u64,
    short_windows: ShortWindows,
}

impl std::fmt::Debug for Recognizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recognizer")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Recognizer {
    /// Audio through the guard: what the model returns is judged ([`judge`]). Every sample
    /// reaches the model; Whisper itself tells speech from silence and noise.
    pub fn transcribe(&mut self, pcm_24k: &[i16]) -> Result<Verdict, LocalError> {
        Ok(judge(&self.recognize(pcm_24k)?))
    }

    /// Recognizes 24 kHz mono PCM16 audio, unguarded: the segments' text joined, and the
    /// highest no-speech probability among them. Blocks for the inference.
    pub fn recognize(&mut self, pcm_24k: &[i16]) -> Result<Recognition, LocalError> {
        let segments = self.segments(pcm_24k)?;
        let text: Vec<&str> = segments.iter().map(|s| s.text.trim()).collect();
        Ok(Recognition {
            text: text.join(" ").trim().to_owned(),
            no_speech_probability: segments
                .iter()
                .map(|s| s.no_speech_probability)
                .fold(0.0, f32::max),
        })
    }

    /// Recognizes a window of 24 kHz mono PCM16 audio (up to 30 s) as timed segments,
    /// unguarded, with whisper.cpp's full 30 s encoder window, timestamps on and segments
    /// split where the model ends them ([`params`]). Blocks for the inference.
    pub fn segments(&mut self, pcm_24k: &[i16]) -> Result<Vec<Segment>, LocalError> {
        self.decode(pcm_24k, &Decode::default())
    }

    /// [`Recognizer::segments`] as `how` says: with a flag that abandons the inference
    /// (`local.aborted`), and a reduced encoder window tried first
    /// ([`Decode::short_window`]), its result kept only if [`check::doubt`] finds nothing
    /// wrong with it, else the full window.
    pub fn decode(&mut self, pcm_24k: &[i16], how: &Decode) -> Result<Vec<Segment>, LocalError> {
        let mut audio = to_whisper_rate(pcm_24k)?;
        // whisper.cpp skips input shorter than 1 s; a short word is padded with silence.
        let shortest = WHISPER_RATE_HZ as usize * 11 / 10;
        if audio.len() < shortest {
            audio.resize(shortest, 0.0);
        }
        let len = pcm_24k.len() as u64;
        if self.model.quit.load(Ordering::SeqCst) {
            return Err(LocalError::Quit);
        }
        let heard = self.heard(&audio, len, how)?;
        self.with_vocabulary(&audio, how, heard)
    }

    /// The window as the model hears it, without the vocabulary.
    fn heard(&mut self, audio: &[f32], len: u64, how: &Decode) -> Result<Vec<Segment>, LocalError> {
        if let Some(short) = &how.short_window {
            let frames = check::reduced_frames(len);
            if frames < check::FULL_WINDOW_FRAMES {
                let raw = self.run(audio, how, Some(frames), false)?;
                match check::doubt(&raw, len, short.voiced_end) {
                    None => {
                        self.short_windows.accepted += 1;
                        return Ok(clamped(raw, len));
                    }
                    Some(doubt) => {
                        self.short_windows.doubted += 1;
                        self.short_windows.last_doubt = Some(doubt);
                    }
                }
            }
        }
        let raw = self.run(audio, how, None, false)?;
        Ok(clamped(raw, len))
    }

    /// `heard` with the listed words written where the model misheard them
    /// ([`super::vocabulary`]): only when a segment holds a stretch that sounds like one is
    /// the window decoded again with the vocabulary as prompt, and only the stretches that
    /// decode confirms change. Timestamps are the first decode's.
    fn with_vocabulary(
        &mut self,
        audio: &[f32],
        how: &Decode,
        mut heard: Vec<Segment>,
    ) -> Result<Vec<Segment>, LocalError> {
        if self.vocabulary.is_empty() || self.prompt_tokens.is_empty() {
            return Ok(heard);
        }
        let suspects: Vec<_> = heard
            .iter()
            .map(|s| self.vocabulary.suspects(&s.text))
            .collect();
        if suspects.iter().all(Vec::is_empty) {
            return Ok(heard);
        }
        self.vocabulary_decodes += 1;
        let prompted = self.run(audio, how, None, true)?;
        let prompted: String = prompted
            .iter()
            .map(|s| s.text.as_str())
            .collect::<Vec<_>>()
            .join(" ");
        for (segment, suspects) in heard.iter_mut().zip(&suspects) {
            if suspects.is_empty() {
                continue;
            }
            if let Some(c) = self.vocabulary.confirm(&segment.text, suspects, &prompted) {
                segment.text = c.text;
                segment.heard = Some(c.heard);
            }
        }
        Ok(heard)
    }

    /// How many windows were decoded a second time with the vocabulary as prompt (a
    /// stretch sounded like a listed word).
    pub fn vocabulary_decodes(&self) -> u64 {
        self.vocabulary_decodes
    }

    /// How the reduced windows asked for so far fared.
    pub fn short_windows(&self) -> ShortWindows {
        self.short_windows
    }

    /// One whisper.cpp inference over 16 kHz `audio`, with `frames` of encoder window
    /// (`None`: the full 30 s): the segments with their raw timestamps, which may run past
    /// the audio into the padding.
    fn run(
        &mut self,
        audio: &[f32],
        how: &Decode,
        frames: Option<u64>,
        prompt: bool,
    ) -> Result<Vec<Segment>, LocalError> {
        let language = self.options.language.clone();
        let mut params = params(self.options.threads, language.as_deref());
        params.set_translate(self.options.translate);
        if let Some(frames) = frames {
            // A reduced window is one greedy pass with its tokens bounded by the audio's
            // length: any doubt is answered by the full window, not by sampling again.
            params.set_audio_ctx(i32::try_from(frames).unwrap_or(0));
            params.set_temperature_inc(0.0);
            let seconds = audio.len().div_ceil(WHISPER_RATE_HZ as usize);
            params.set_max_tokens(i32::try_from(check::max_tokens(seconds)).unwrap_or(i32::MAX));
        }
        if prompt && !self.prompt_tokens.is_empty() {
            params.set_tokens(&self.prompt_tokens);
        } else {
            // Nothing carried between whisper.cpp's passes over one window either
            // (`no_context` clears the text only at the call's start; a pass that stops
            // short is followed by one over the rest, prompted with what the first decoded).
            // Each window is heard on its own, as Persyk means it to; and such a prompt, up
            // to 224 tokens, has the decoder compute logits for every one of them, touching
            // up to 47 MB more of its compute buffer (base) the first time a long one comes:
            // a step in resident memory part-way into a long file (issue #38).
            params.set_n_max_text_ctx(0);
        }
        let flags = AbortFlags {
            window: how.abort.clone(),
            quit: self.model.quit.clone(),
        };
        // SAFETY: `aborted` only reads the two `AtomicBool`s of `flags`, which lives on this
        // stack frame (and holds both `Arc`s) until after the `full` call that uses it.
        // whisper-rs's closure variant (`set_abort_callback_safe`) is not used: in 0.16 it
        // instantiates its trampoline with the closure's type while the pointer it passes is
        // a boxed trait object.
        unsafe {
            params.set_abort_callback(Some(aborted));
            params.set_abort_callback_user_data(
                std::ptr::from_ref(&flags)
                    .cast_mut()
                    .cast::<std::ffi::c_void>(),
            );
        }
        let result = self.state.full(params, audio);
        if flags.quit.load(Ordering::SeqCst) {
            return Err(LocalError::Quit);
        }
        if flags.window.is_some_and(|f| f.load(Ordering::Relaxed)) {
            return Err(LocalError::Aborted);
        }
        result.map_err(|_| LocalError::InferenceFailed)?;
        // Timestamps are in 10 ms steps: 240 samples at 24 kHz.
        let at = |t: i64| u64::try_from(t).unwrap_or(0) * 240;
        let mut out = Vec::new();
        for segment in self.state.as_iter() {
            let text = segment
                .to_str_lossy()
                .map_err(|_| LocalError::InferenceFailed)?;
            out.push(Segment {
                start_sample: at(segment.start_timestamp()),
                end_sample: at(segment.end_timestamp()),
                text: text.into_owned(),
                no_speech_probability: segment.no_speech_probability(),
                heard: None,
            });
        }
        Ok(out)
    }
}

/// `segments` with their timestamps cut to the audio's `len` samples.
fn clamped(mut segments: Vec<Segment>, len: u64) -> Vec<Segment> {
    for s in &mut segments {
        s.start_sample = s.start_sample.min(len);
        s.end_sample = s.end_sample.min(len);
    }
    segments
}

/// How the reduced encoder windows of one recognizer fared: kept, or doubted and decoded
/// again with the full window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShortWindows {
    pub accepted: u64,
    pub doubted: u64,
    /// Why the last doubted one was.
    pub last_doubt: Option<check::Doubt>,
}

/// What abandons one inference: the engine's flag for this window, or the app quitting.
struct AbortFlags {
    window: Option<Arc<AtomicBool>>,
    quit: Arc<AtomicBool>,
}

/// whisper.cpp's abort callback: either flag of the [`AbortFlags`] behind `flags` is set.
unsafe extern "C" fn aborted(flags: *mut std::ffi::c_void) -> bool {
    // SAFETY: the pointer is an `AbortFlags` that `Recognizer::run` keeps alive on its stack
    // for the whole inference.
    let flags = unsafe { &*(flags as *const AbortFlags) };
    flags.quit.load(Ordering::Relaxed)
        || flags
            .window
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Relaxed))
}

/// Temperature steps of the fallback when a decode looks wrong (whisper.cpp's entropy and
/// log-probability checks): 0, 0.2, … 1.0, whisper.cpp's own default — at most six decoder
/// passes over one encoding of a window. (Steps of 0.4 cost fewer passes and lost words the
/// default keeps: "8 of spades" came back "8 of speeds" in the cards clip.)
pub const TEMPERATURE_STEP: f32 = 0.2;

/// How whisper.cpp decodes a window: greedy, the full 30 s encoder window (a reduced one
/// makes the standard models repeat themselves and lose words), timestamps on and
/// `single_segment` off (so a decode that stops early is continued, not dropped), blank and
/// non-speech tokens suppressed, each window on its own (`no_context`; [`Recognizer::run`]
/// also keeps whisper.cpp's passes over one window apart), a bounded temperature fallback.
fn params(threads: usize, language: Option<&str>) -> FullParams<'_, '_> {
    let mut params = FullParams::new(SamplingStrategy::Greedy { best_of: 1 });
    params.set_n_threads(i32::try_from(threads.max(1)).unwrap_or(1));
    params.set_language(language);
    params.set_translate(false);
    params.set_no_context(true);
    params.set_no_timestamps(false);
    params.set_single_segment(false);
    params.set_suppress_blank(true);
    params.set_suppress_nst(true);
    params.set_temperature(0.0);
    params.set_temperature_inc(TEMPERATURE_STEP);
    params.set_print_special(false);
    params.set_print_progress(false);
    params.set_print_realtime(false);
    params.set_print_timestamps(false);
    params
}

impl super::dictation::Recognize for Recognizer {
    fn transcribe(&mut self, pcm_24k: &[i16]) -> Result<Verdict, LocalError> {
        Recognizer::transcribe(self, pcm_24k)
    }

    fn segments(&mut self, pcm_24k: &[i16]) -> Result<Vec<Segment>, LocalError> {
        Recognizer::segments(self, pcm_24k)
    }

    fn decode(&mut self, pcm_24k: &[i16], how: &Decode) -> Result<Vec<Segment>, LocalError> {
        Recognizer::decode(self, pcm_24k, how)
    }

    fn file_window_ms(&self) -> u64 {
        super::dictation::file_window_ms(self.model.context.model_n_audio_layer())
    }
}

/// The setup of a local recording with `model`: a fresh recognizer and the provenance
/// (`model_change` with the model id and this build's whisper.cpp version).
pub fn setup(
    model: &LocalModel,
    options: LocalOptions,
    drain_deadline: std::time::Duration,
) -> Result<super::dictation::LocalSetup, LocalError> {
    let mut provenance = provenance(model);
    provenance.language = options.language.clone();
    provenance.translated = options.translate && model.is_multilingual();
    Ok(super::dictation::LocalSetup {
        recognizer: Box::new(model.recognizer(options)?),
        provenance,
        drain_deadline,
        hold: None,
    })
}

/// Where the text of a recording with `model` comes from.
pub fn provenance(model: &LocalModel) -> super::dictation::Provenance {
    super::dictation::Provenance {
        model_id: super::dictation::model_id(model.path()),
        api: format!("whisper.cpp {}", whisper_cpp_version()),
        language: None,
        translated: false,
    }
}
