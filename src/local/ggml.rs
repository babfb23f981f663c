//! The ggml Whisper model file, checked the way whisper.cpp's loader will read it.
//!
//! whisper.cpp (`whisper_model_load`) trusts the file: a bad `ftype` is a `GGML_ASSERT`, a
//! tensor header with more than four dimensions writes past a stack array, a huge name or
//! token length is an allocation that throws through the C boundary, and a vocabulary or
//! tensor that runs past the end is read as garbage. Any of them aborts the process.
//! [`validate`] reads what the loader reads — the header, the mel filters, the vocabulary and
//! every tensor's header — and seeks over the bulk data, so a file reaches whisper.cpp only
//! when every field is one the loader handles and every byte it will read is in the file.
//!
//! The layout (all integers little-endian `i32`/`u32`):
//!
//! ```text
//! magic "ggml" (0x67676d6c)
//! hparams: n_vocab n_audio_ctx n_audio_state n_audio_head n_audio_layer
//!          n_text_ctx n_text_state n_text_head n_text_layer n_mels ftype
//! mel filters: n_mel n_fft, then n_mel × n_fft f32
//! vocabulary: n, then n × (len u32, len bytes)
//! tensors until the end of the file: n_dims name_len ttype, ne[n_dims], name, data
//! ```
//!
//! Invariant: [`validate`] returning `Ok` means the file holds exactly the tensors whisper.cpp
//! creates for its hyperparameters, each once, with the expected shape and type, its data
//! inside the file, and nothing after the last tensor.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};

/// The magic number at the start of a ggml Whisper model (`"ggml"` as a little-endian u32).
pub const GGML_MAGIC: u32 = 0x6767_6d6c;

/// whisper.cpp's `GGML_QNT_VERSION_FACTOR`: `ftype` carries a quantization version above it.
const QNT_VERSION_FACTOR: i32 = 1_000;
/// The encoder positions of every Whisper model (30 s).
const AUDIO_CTX: i32 = 1_500;
/// The decoder positions of every Whisper model.
const TEXT_CTX: i32 = 448;
/// The FFT bins of Whisper's mel filters (`N_FFT / 2 + 1`).
const MEL_FFT_BINS: i32 = 201;
/// Vocabulary sizes whisper.cpp knows (English-only, multilingual, large-v3).
const VOCAB_SIZES: std::ops::RangeInclusive<i32> = 51_864..=51_866;
/// Encoder depths of the official sizes (tiny, base, small, medium, large).
const AUDIO_LAYERS: [i32; 5] = [4, 6, 12, 24, 32];
/// Longer names or tokens are damage, not a model.
const MAX_NAME_BYTES: i32 = 256;
const MAX_TOKEN_BYTES: u32 = 1_024;

/// Why a file is not a model whisper.cpp can load: what was wrong and where (a byte offset;
/// never the file's content).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Invalid {
    pub reason: &'static str,
    pub offset: u64,
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at byte {}", self.reason, self.offset)
    }
}

/// Reading the file failed, or it is not a model.
#[derive(Debug)]
pub enum CheckError {
    Io(io::Error),
    Invalid(Invalid),
}

/// What a valid file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub n_vocab: i32,
    pub audio_layers: i32,
    pub text_layers: i32,
    pub ftype: i32,
    pub tensors: usize,
}

impl Summary {
    /// Whether the model recognizes several languages (whisper.cpp's rule).
    pub fn is_multilingual(&self) -> bool {
        self.n_vocab >= 51_865
    }
}

/// A ggml tensor type: (id, bytes per block, elements per block). Only the types a Whisper
/// `ftype` can produce are known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TensorType {
    id: i32,
    block_bytes: u64,
    block_len: u64,
}

const fn tt(id: i32, block_bytes: u64, block_len: u64) -> TensorType {
    TensorType {
        id,
        block_bytes,
        block_len,
    }
}

const F32: TensorType = tt(0, 4, 1);
const F16: TensorType = tt(1, 2, 1);
/// F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (ggml-common.h).
const TYPES: [TensorType; 12] = [
    F32,
    F16,
    tt(2, 18, 32),
    tt(3, 20, 32),
    tt(6, 22, 32),
    tt(7, 24, 32),
    tt(8, 34, 32),
    tt(10, 84, 256),
    tt(11, 110, 256),
    tt(12, 144, 256),
    tt(13, 176, 256),
    tt(14, 210, 256),
];

fn tensor_type(id: i32) -> Option<TensorType> {
    TYPES.iter().copied().find(|t| t.id == id)
}

/// The weight type of a file type (`ggml_ftype_to_ggml_type`), for the types known here.
fn weight_type(ftype: i32) -> Option<TensorType> {
    let id = match ftype {
        0 => 0,
        1 => 1,
        2 => 2,
        3 => 3,
        7 => 8,
        8 => 6,
        9 => 7,
        10..=14 => ftype,
        _ => return None,
    };
    tensor_type(id)
}

/// A tensor whisper.cpp creates: its shape (ggml order, padded with 1) and type.
#[derive(Debug, Clone, Copy)]
struct Expected {
    ne: [u64; 4],
    ty: TensorType,
    seen: bool,
}

impl Expected {
    /// Bytes of data: rows × blocks per row × block bytes (`None` when a row is not a
    /// whole number of blocks).
    fn data_bytes(&self) -> Option<u64> {
        if !self.ne[0].is_multiple_of(self.ty.block_len) {
            return None;
        }
        let row = (self.ne[0] / self.ty.block_len).checked_mul(self.ty.block_bytes)?;
        row.checked_mul(self.ne[1])?
            .checked_mul(self.ne[2])?
            .checked_mul(self.ne[3])
    }
}

/// The tensors whisper.cpp creates for these hyperparameters, by name.
fn expected_tensors(h: &Hparams, wtype: TensorType) -> HashMap<String, Expected> {
    let vtype = if wtype == F32 { F32 } else { F16 };
    let mut map = HashMap::new();
    let mut add = |name: String, ne: &[i32], ty: TensorType| {
        let mut dims = [1u64; 4];
        for (d, n) in dims.iter_mut().zip(ne) {
            *d = u64::try_from(*n).unwrap_or(0);
        }
        map.insert(
            name,
            Expected {
                ne: dims,
                ty,
                seen: false,
            },
        );
    };
    let s = h.n_audio_state;
    add(
        "encoder.positional_embedding".into(),
        &[s, h.n_audio_ctx],
        F32,
    );
    add("encoder.conv1.weight".into(), &[3, h.n_mels, s], vtype);
    add("encoder.conv1.bias".into(), &[1, s], F32);
    add("encoder.conv2.weight".into(), &[3, s, s], vtype);
    add("encoder.conv2.bias".into(), &[1, s], F32);
    add("encoder.ln_post.weight".into(), &[s], F32);
    add("encoder.ln_post.bias".into(), &[s], F32);
    let mut block = |prefix: String, s: i32, cross: bool| {
        let p = |rest: &str| format!("{prefix}.{rest}");
        add(p("mlp_ln.weight"), &[s], F32);
        add(p("mlp_ln.bias"), &[s], F32);
        add(p("mlp.0.weight"), &[s, 4 * s], wtype);
        add(p("mlp.0.bias"), &[4 * s], F32);
        add(p("mlp.2.weight"), &[4 * s, s], wtype);
        add(p("mlp.2.bias"), &[s], F32);
        let attentions: &[&str] = if cross {
            &["attn", "cross_attn"]
        } else {
            &["attn"]
        };
        for a in attentions {
            add(p(&format!("{a}_ln.weight")), &[s], F32);
            add(p(&format!("{a}_ln.bias")), &[s], F32);
            add(p(&format!("{a}.query.weight")), &[s, s], wtype);
            add(p(&format!("{a}.query.bias")), &[s], F32);
            add(p(&format!("{a}.key.weight")), &[s, s], wtype);
            add(p(&format!("{a}.value.weight")), &[s, s], wtype);
            add(p(&format!("{a}.value.bias")), &[s], F32);
            add(p(&format!("{a}.out.weight")), &[s, s], wtype);
            add(p(&format!("{a}.out.bias")), &[s], F32);
        }
    };
    for i in 0..h.n_audio_layer {
        block(format!("encoder.blocks.{i}"), s, false);
    }
    let t = h.n_text_state;
    for i in 0..h.n_text_layer {
        block(format!("decoder.blocks.{i}"), t, true);
    }
    add(
        "decoder.positional_embedding".into(),
        &[t, h.n_text_ctx],
        F32,
    );
    add(
        "decoder.token_embedding.weight".into(),
        &[t, h.n_vocab],
        wtype,
    );
    add("decoder.ln.weight".into(), &[t], F32);
    add("decoder.ln.bias".into(), &[t], F32);
    map
}

#[derive(Debug, Clone, Copy)]
struct Hparams {
    n_vocab: i32,
    n_audio_ctx: i32,
    n_audio_state: i32,
    n_audio_head: i32,
    n_audio_layer: i32,
    n_text_ctx: i32,
    n_text_state: i32,
    n_text_head: i32,
    n_text_layer: i32,
    n_mels: i32,
    ftype: i32,
}

/// A buffered reader that knows its offset and the file's length and never reads or seeks
/// past the end.
struct Cursor {
    inner: BufReader<File>,
    at: u64,
    len: u64,
}

impl Cursor {
    fn invalid(&self, reason: &'static str) -> CheckError {
        CheckError::Invalid(Invalid {
            reason,
            offset: self.at,
        })
    }

    fn bytes<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], CheckError> {
        let mut buf = [0u8; N];
        self.fill(&mut buf, what)?;
        Ok(buf)
    }

    fn fill(&mut self, buf: &mut [u8], what: &'static str) -> Result<(), CheckError> {
        if self.len.saturating_sub(self.at) < buf.len() as u64 {
            return Err(self.invalid(what));
        }
        self.inner.read_exact(buf).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => self.invalid(what),
            _ => CheckError::Io(e),
        })?;
        self.at += buf.len() as u64;
        Ok(())
    }

    fn i32(&mut self, what: &'static str) -> Result<i32, CheckError> {
        Ok(i32::from_le_bytes(self.bytes(what)?))
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, CheckError> {
        Ok(u32::from_le_bytes(self.bytes(what)?))
    }

    /// Skips `n` vocabulary entries (`len u32`, `len` bytes each): whole entries straight
    /// from the read buffer, one that straddles its end field by field.
    fn skip_tokens(&mut self, n: i32) -> Result<(), CheckError> {
        const END: &str = "the file ends in the vocabulary";
        const LONG: &str = "a vocabulary entry is too long";
        let mut left = n;
        while left > 0 {
            let buf = self.inner.fill_buf().map_err(CheckError::Io)?;
            let mut used = 0usize;
            let mut too_long = false;
            while left > 0 {
                let Some(field) = buf.get(used..used + 4) else {
                    break;
                };
                let len = u32::from_le_bytes([field[0], field[1], field[2], field[3]]);
                if len > MAX_TOKEN_BYTES {
                    too_long = true;
                    break;
                }
                if buf.len() - used - 4 < len as usize {
                    break;
                }
                used += 4 + len as usize;
                left -= 1;
            }
            self.inner.consume(used);
            self.at += used as u64;
            if too_long {
                return Err(self.invalid(LONG));
            }
            if left > 0 && used == 0 {
                // An entry across the end of the buffer (or of the file).
                let len = self.u32(END)?;
                if len > MAX_TOKEN_BYTES {
                    return Err(self.invalid(LONG));
                }
                self.skip(u64::from(len), END)?;
                left -= 1;
            }
        }
        Ok(())
    }

    /// Skips `n` bytes that must lie inside the file.
    fn skip(&mut self, n: u64, what: &'static str) -> Result<(), CheckError> {
        if self.len.saturating_sub(self.at) < n {
            return Err(self.invalid(what));
        }
        let step = i64::try_from(n).map_err(|_| self.invalid(what))?;
        self.inner.seek_relative(step).map_err(CheckError::Io)?;
        self.at += n;
        Ok(())
    }
}

/// Checks `file` (opened, at offset 0, `len` bytes long) as a whisper.cpp model: see the
/// module documentation. Reads the header, the vocabulary and the tensor table; seeks over
/// the filters and the tensor data.
pub fn validate(file: File, len: u64) -> Result<Summary, CheckError> {
    let mut c = Cursor {
        inner: BufReader::with_capacity(64 * 1024, file),
        at: 0,
        len,
    };
    if c.u32("the file is shorter than the ggml magic")? != GGML_MAGIC {
        return Err(CheckError::Invalid(Invalid {
            reason: "the file does not start with the ggml magic",
            offset: 0,
        }));
    }
    let h = read_hparams(&mut c)?;
    let wtype = check_hparams(&h)?;

    // Mel filters: the size whisper.cpp allocates comes from these two fields.
    let n_mel = c.i32("the file ends in the mel filters")?;
    let n_fft = c.i32("the file ends in the mel filters")?;
    if n_mel != h.n_mels || n_fft != MEL_FFT_BINS {
        return Err(c.invalid("the mel filter table has the wrong size"));
    }
    c.skip(
        n_mel as u64 * n_fft as u64 * 4,
        "the file ends in the mel filters",
    )?;

    // Vocabulary.
    let n_tokens = c.i32("the file ends before the vocabulary")?;
    if !(0..=h.n_vocab).contains(&n_tokens) {
        return Err(c.invalid("the vocabulary size is out of range"));
    }
    c.skip_tokens(n_tokens)?;

    // Tensors, until the end of the file.
    let mut expected = expected_tensors(&h, wtype);
    let mut tensors = 0usize;
    let mut name = Vec::with_capacity(MAX_NAME_BYTES as usize);
    while c.at < c.len {
        let n_dims = c.i32("the file ends in a tensor header")?;
        let name_len = c.i32("the file ends in a tensor header")?;
        let ttype = c.i32("the file ends in a tensor header")?;
        if !(1..=4).contains(&n_dims) {
            return Err(c.invalid("a tensor has an impossible number of dimensions"));
        }
        if !(1..=MAX_NAME_BYTES).contains(&name_len) {
            return Err(c.invalid("a tensor name has an impossible length"));
        }
        let ty = tensor_type(ttype).ok_or_else(|| c.invalid("a tensor has an unknown type"))?;
        let mut ne = [1u64; 4];
        for d in ne.iter_mut().take(n_dims as usize) {
            let n = c.i32("the file ends in a tensor header")?;
            *d = u64::try_from(n)
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| c.invalid("a tensor has an impossible dimension"))?;
        }
        name.resize(name_len as usize, 0);
        c.fill(&mut name, "the file ends in a tensor name")?;
        let slot = std::str::from_utf8(&name)
            .ok()
            .and_then(|n| expected.get_mut(n))
            .ok_or_else(|| c.invalid("a tensor is not one of the model's"))?;
        if slot.seen {
            return Err(c.invalid("a tensor appears twice"));
        }
        if slot.ne != ne {
            return Err(c.invalid("a tensor has the wrong shape"));
        }
        if slot.ty != ty {
            return Err(c.invalid("a tensor has the wrong type"));
        }
        slot.seen = true;
        let bytes = slot
            .data_bytes()
            .ok_or_else(|| c.invalid("a tensor's size does not fit its type"))?;
        c.skip(bytes, "a tensor's data runs past the end of the file")?;
        tensors += 1;
    }
    if tensors != expected.len() {
        return Err(c.invalid("the file ends before every tensor was found"));
    }
    Ok(Summary {
        n_vocab: h.n_vocab,
        audio_layers: h.n_audio_layer,
        text_layers: h.n_text_layer,
        ftype: h.ftype,
        tensors,
    })
}

fn read_hparams(c: &mut Cursor) -> Result<Hparams, CheckError> {
    const END: &str = "the file ends in the header";
    Ok(Hparams {
        n_vocab: c.i32(END)?,
        n_audio_ctx: c.i32(END)?,
        n_audio_state: c.i32(END)?,
        n_audio_head: c.i32(END)?,
        n_audio_layer: c.i32(END)?,
        n_text_ctx: c.i32(END)?,
        n_text_state: c.i32(END)?,
        n_text_head: c.i32(END)?,
        n_text_layer: c.i32(END)?,
        n_mels: c.i32(END)?,
        ftype: c.i32(END)?,
    })
}

/// The hyperparameters of a Whisper model whisper.cpp can build; returns the weight type.
fn check_hparams(h: &Hparams) -> Result<TensorType, CheckError> {
    let bad = |reason: &'static str| Err(CheckError::Invalid(Invalid { reason, offset: 4 }));
    if !VOCAB_SIZES.contains(&h.n_vocab) {
        return bad("the header's vocabulary size is not a Whisper one");
    }
    if h.n_audio_ctx != AUDIO_CTX || h.n_text_ctx != TEXT_CTX {
        return bad("the header's context sizes are not Whisper's");
    }
    if !AUDIO_LAYERS.contains(&h.n_audio_layer) || !(1..=32).contains(&h.n_text_layer) {
        return bad("the header's layer counts are out of range");
    }
    let heads_fit = |state: i32, heads: i32| {
        (1..=4_096).contains(&state) && (1..=64).contains(&heads) && state % heads == 0
    };
    if h.n_audio_state != h.n_text_state
        || !heads_fit(h.n_audio_state, h.n_audio_head)
        || !heads_fit(h.n_text_state, h.n_text_head)
    {
        return bad("the header's widths or head counts are out of range");
    }
    if h.n_mels != 80 && h.n_mels != 128 {
        return bad("the header's mel band count is not Whisper's");
    }
    if !(0..QNT_VERSION_FACTOR * 16).contains(&h.ftype) {
        return bad("the header's file type is out of range");
    }
    match weight_type(h.ftype % QNT_VERSION_FACTOR) {
        Some(t) => Ok(t),
        None => bad("the header's file type is unknown"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_sizes_follow_ggml() {
        assert_eq!(tensor_type(6), Some(tt(6, 22, 32)));
        assert_eq!(
            weight_type(8).map(|t| t.id),
            Some(6),
            "q5_0 file → q5_0 weights"
        );
        assert_eq!(
            weight_type(4),
            None,
            "q4_1 with some f16 is refused by ggml"
        );
        assert_eq!(weight_type(24), None, "bf16 is not offered");
        let e = Expected {
            ne: [384, 384, 1, 1],
            ty: tt(6, 22, 32),
            seen: false,
        };
        assert_eq!(e.data_bytes(), Some(384 / 32 * 22 * 384));
        let odd = Expected {
            ne: [100, 2, 1, 1],
            ..e
        };
        assert_eq!(odd.data_bytes(), None);
    }

    #[test]
    fn the_expected_tensor_count_is_whisper_cpps() {
        let h = Hparams {
            n_vocab: 51_864,
            n_audio_ctx: AUDIO_CTX,
            n_audio_state: 384,
            n_audio_head: 6,
            n_audio_layer: 4,
            n_text_ctx: TEXT_CTX,
            n_text_state: 384,
            n_text_head: 6,
            n_text_layer: 4,
            n_mels: 80,
            ftype: 1,
        };
        // 7 encoder + 15 per encoder block + 4 decoder + 24 per decoder block.
        assert_eq!(expected_tensors(&h, F16).len(), 7 + 15 * 4 + 4 + 24 * 4);
    }
}
