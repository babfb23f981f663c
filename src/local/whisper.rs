//! The whisper.cpp engine (whisper-rs): a loaded model and the recognizer that runs it.
//!
//! [`LocalModel::load`] checks the whole file ([`super::check_model_file`]: header, vocabulary,
//! tensor table), then lets whisper.cpp load it (Metal on
//! Apple targets through the crate's `metal` feature). A [`Recognizer`] owns one inference
//! state and recognizes utterances one at a time on whatever thread owns it — the callers
//! give it a thread of its own. Each utterance is decoded on its own (`no_context`), greedy,
//! with blank and non-speech tokens suppressed, then judged by [`super::judge`]. An utterance
//! shorter than whisper.cpp's 30 s window is one segment encoded over a window that follows
//! its length ([`super::audio_ctx_for`]: the audio plus 1 s), not the full 30 s: the encoder,
//! the fixed cost of every call, shrinks with the utterance (a 3 s utterance costs about a
//! tenth of a full window on tiny.en, with the same words on the clips measured).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Once};

use whisper_rs::{FullParams, SamplingStrategy, WhisperContext, WhisperContextParameters};

use super::{
    LocalError, LocalOptions, Recognition, Verdict, check_model_file, judge, to_whisper_rate,
    voiced_ms, worth_recognizing,
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
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

static QUIET: Once = Once::new();

impl LocalModel {
    /// Loads the ggml model at `path`.
    pub fn load(path: &Path) -> Result<LocalModel, LocalError> {
        check_model_file(path)?;
        // whisper.cpp logs every allocation to stderr; route it to nowhere (the crate's
        // hooks drop messages unless a logging backend feature is on).
        QUIET.call_once(whisper_rs::install_logging_hooks);
        let path_str = path.to_str().ok_or(LocalError::ModelUnreadable)?;
        let context =
            WhisperContext::new_with_params(path_str, WhisperContextParameters::default())
                .map_err(|_| {
                    LocalError::ModelInvalid(super::ggml::Invalid {
                        reason: "whisper.cpp could not load it",
                        offset: 0,
                    })
                })?;
        Ok(LocalModel {
            context: Arc::new(context),
            path: path.to_owned(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the model recognizes several languages (`false` for `*.en` models).
    pub fn is_multilingual(&self) -> bool {
        self.context.is_multilingual()
    }

    /// A recognizer with its own inference state.
    pub fn recognizer(&self, options: LocalOptions) -> Result<Recognizer, LocalError> {
        let state = self
            .context
            .create_state()
            .map_err(|_| LocalError::InferenceFailed)?;
        Ok(Recognizer {
            _model: self.clone(),
            state,
            options,
        })
    }
}

/// One inference state; recognizes one utterance at a time.
pub struct Recognizer {
    /// Keeps the context alive as long as the state.
    _model: LocalModel,
    state: whisper_rs::WhisperState,
    options: LocalOptions,
}

impl std::fmt::Debug for Recognizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recognizer")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Recognizer {
    /// One utterance through every guard: audio without enough voiced frames never reaches
    /// the model, and what the model returns is judged ([`judge`]).
    pub fn transcribe(&mut self, pcm_24k: &[i16]) -> Result<Verdict, LocalError> {
        if !worth_recognizing(voiced_ms(pcm_24k)) {
            return Ok(Verdict::NoSpeech);
        }
        Ok(judge(&self.recognize(pcm_24k)?))
    }

    /// Recognizes 24 kHz mono PCM16 audio (one utterance), unguarded. Blocks for the
    /// inference.
    pub fn recognize(&mut self, pcm_24k: &[i16]) -> Result<Recognition, LocalError> {
        let audio = to_whisper_rate(pcm_24k)?;
        let mut params = FullParams::new(SamplingStrategy::Greedy { best_of: 1 });
        params.set_n_threads(i32::try_from(self.options.threads.max(1)).unwrap_or(1));
        params.set_language(self.options.language.as_deref());
        params.set_translate(false);
        params.set_no_context(true);
        params.set_no_timestamps(false);
        // An utterance (at most the segmenter's 28 s) is one window, encoded only as far as
        // it reaches (`audio_ctx_for`); longer audio keeps whisper.cpp's 30 s windows.
        if let Some(n) = super::audio_ctx_for(audio.len()) {
            params.set_audio_ctx(i32::try_from(n).unwrap_or(0));
            params.set_single_segment(true);
        }
        params.set_suppress_blank(true);
        params.set_suppress_nst(true);
        params.set_print_special(false);
        params.set_print_progress(false);
        params.set_print_realtime(false);
        params.set_print_timestamps(false);
        self.state
            .full(params, &audio)
            .map_err(|_| LocalError::InferenceFailed)?;
        let mut text = String::new();
        let mut no_speech = 0.0f32;
        for segment in self.state.as_iter() {
            let piece = segment
                .to_str_lossy()
                .map_err(|_| LocalError::InferenceFailed)?;
            text.push_str(&piece);
            no_speech = no_speech.max(segment.no_speech_probability());
        }
        Ok(Recognition {
            text: text.trim().to_owned(),
            no_speech_probability: no_speech,
        })
    }
}

impl super::dictation::Recognize for Recognizer {
    fn transcribe(&mut self, pcm_24k: &[i16]) -> Result<Verdict, LocalError> {
        Recognizer::transcribe(self, pcm_24k)
    }
}

/// The setup of a local recording with `model`: a fresh recognizer and the provenance
/// (`model_change` with the model id and this build's whisper.cpp version).
pub fn setup(
    model: &LocalModel,
    options: LocalOptions,
    drain_deadline: std::time::Duration,
) -> Result<super::dictation::LocalSetup, LocalError> {
    Ok(super::dictation::LocalSetup {
        recognizer: Box::new(model.recognizer(options)?),
        provenance: provenance(model),
        drain_deadline,
    })
}

/// Where the text of a recording with `model` comes from.
pub fn provenance(model: &LocalModel) -> super::dictation::Provenance {
    super::dictation::Provenance {
        model_id: super::dictation::model_id(model.path()),
        api: format!("whisper.cpp {}", whisper_cpp_version()),
    }
}
