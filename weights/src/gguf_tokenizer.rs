//! Builds a `tokenizers::Tokenizer` from the vocabulary, merges and pre-tokenizer name stored in
//! GGUF metadata (GGUF files ship no tokenizer.json).

use std::collections::HashMap;

use candle_core::quantized::gguf_file::Value;
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::BPE;
use tokenizers::normalizers::unicode::NFC;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::{AddedToken, PreTokenizerWrapper, SplitDelimiterBehavior, Tokenizer};

use crate::error::{WeightsError, WeightsResult};

/// GGUF token types (llama.cpp's `llama_token_type`): 3 = control, 4 = user defined.
const TOKEN_TYPE_CONTROL: u32 = 3;
const TOKEN_TYPE_USER_DEFINED: u32 = 4;

/// The split regexes of the pre-tokenizers named by `tokenizer.ggml.pre`. Qwen2 splits digits one
/// by one inside its regex; GPT-2/SmolLM keep runs of letters with a leading space.
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

fn meta<'a>(md: &'a HashMap<String, Value>, key: &str) -> WeightsResult<&'a Value> {
    md.get(key).ok_or_else(|| WeightsError::BadMetadata {
        key: key.to_string(),
        detail: "missing".into(),
    })
}

fn bad(key: &str, e: impl std::fmt::Display) -> WeightsError {
    WeightsError::BadMetadata {
        key: key.to_string(),
        detail: e.to_string(),
    }
}

fn strings(md: &HashMap<String, Value>, key: &str) -> WeightsResult<Vec<String>> {
    meta(md, key)?
        .to_vec()
        .map_err(|e| bad(key, e))?
        .iter()
        .map(|v| v.to_string().cloned().map_err(|e| bad(key, e)))
        .collect()
}

fn optional_u32(md: &HashMap<String, Value>, key: &str) -> Option<u32> {
    md.get(key).and_then(|v| v.to_u32().ok())
}

fn split(regex: &str) -> WeightsResult<PreTokenizerWrapper> {
    let s = Split::new(
        SplitPattern::Regex(regex.to_string()),
        SplitDelimiterBehavior::Isolated,
        false,
    )
    .map_err(|e| WeightsError::Tokenizer {
        detail: e.to_string(),
    })?;
    Ok(s.into())
}

/// The pre-tokenizer for a GGUF `tokenizer.ggml.pre` name, matching the upstream tokenizer.json.
fn pre_tokenizer(pre: &str) -> WeightsResult<PreTokenizerWrapper> {
    let byte_level_only = ByteLevel::new(false, false, false);
    Ok(match pre {
        "qwen2" => Sequence::new(vec![split(QWEN2_SPLIT)?, byte_level_only.into()]).into(),
        "llama3" | "llama-bpe" | "smaug-bpe" => {
            Sequence::new(vec![split(LLAMA3_SPLIT)?, byte_level_only.into()]).into()
        }
        // SmolLM: every digit is its own piece, then GPT-2's byte-level regex split.
        "smollm" => Sequence::new(vec![
            split(r"\p{N}")?,
            ByteLevel::new(false, true, true).into(),
        ])
        .into(),
        _ => ByteLevel::new(false, true, true).into(),
    })
}

/// Builds the tokenizer. Fails with `Tokenizer` for models other than byte-level BPE (`gpt2`).
pub fn tokenizer_from_gguf(md: &HashMap<String, Value>) -> WeightsResult<Tokenizer> {
    let model = meta(md, "tokenizer.ggml.model")?
        .to_string()
        .map_err(|e| bad("tokenizer.ggml.model", e))?;
    if model != "gpt2" {
        return Err(WeightsError::Tokenizer {
            detail: format!(
                "tokenizer model `{model}` is not supported (only byte-level BPE `gpt2`)"
            ),
        });
    }
    let tokens = strings(md, "tokenizer.ggml.tokens")?;
    let merges = strings(md, "tokenizer.ggml.merges")?
        .into_iter()
        .map(|m| {
            m.split_once(' ')
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .ok_or_else(|| bad("tokenizer.ggml.merges", format!("merge `{m}` has no space")))
        })
        .collect::<WeightsResult<Vec<_>>>()?;
    let vocab: tokenizers::models::bpe::Vocab = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), i as u32))
        .collect();
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .build()
        .map_err(|e| WeightsError::Tokenizer {
            detail: e.to_string(),
        })?;
    let mut tokenizer = Tokenizer::new(bpe);
    let pre = md
        .get("tokenizer.ggml.pre")
        .and_then(|v| v.to_string().ok())
        .map(String::as_str)
        .unwrap_or("default");
    if pre == "qwen2" {
        tokenizer
            .with_normalizer(Some(NFC))
            .map_err(|e| WeightsError::Tokenizer {
                detail: e.to_string(),
            })?;
    }
    tokenizer.with_pre_tokenizer(Some(pre_tokenizer(pre)?));
    tokenizer.with_decoder(Some(ByteLevelDecoder::new(false, false, false)));
    add_special_tokens(md, &tokens, &mut tokenizer)?;
    add_bos_processor(md, &tokens, &mut tokenizer)?;
    Ok(tokenizer)
}

/// Control and user-defined tokens (`<|im_start|>`, ...) must match as whole tokens, never be
/// split by BPE.
fn add_special_tokens(
    md: &HashMap<String, Value>,
    tokens: &[String],
    tokenizer: &mut Tokenizer,
) -> WeightsResult<()> {
    let Some(types) = md.get("tokenizer.ggml.token_type") else {
        return Ok(());
    };
    let types = types
        .to_vec()
        .map_err(|e| bad("tokenizer.ggml.token_type", e))?;
    let mut specials = Vec::new();
    for (id, ty) in types.iter().enumerate() {
        let ty = ty
            .to_i32()
            .map(|v| v as u32)
            .or_else(|_| ty.to_u32())
            .map_err(|e| bad("tokenizer.ggml.token_type", e))?;
        if (ty == TOKEN_TYPE_CONTROL || ty == TOKEN_TYPE_USER_DEFINED)
            && let Some(t) = tokens.get(id)
        {
            specials.push(AddedToken::from(t.clone(), ty == TOKEN_TYPE_CONTROL));
        }
    }
    tokenizer
        .add_special_tokens(specials)
        .map_err(|e| WeightsError::Tokenizer {
            detail: e.to_string(),
        })?;
    Ok(())
}

fn add_bos_processor(
    md: &HashMap<String, Value>,
    tokens: &[String],
    tokenizer: &mut Tokenizer,
) -> WeightsResult<()> {
    let add_bos = md
        .get("tokenizer.ggml.add_bos_token")
        .and_then(|v| v.to_bool().ok())
        .unwrap_or(false);
    let bos = optional_u32(md, "tokenizer.ggml.bos_token_id");
    let (true, Some(bos)) = (add_bos, bos) else {
        return Ok(());
    };
    let Some(bos_text) = tokens.get(bos as usize) else {
        return Ok(());
    };
    let processor = TemplateProcessing::builder()
        .try_single(format!("{bos_text} $0"))
        .and_then(|b| b.try_pair(format!("{bos_text} $A {bos_text} $B")))
        .map_err(|e| WeightsError::Tokenizer { detail: e })?
        .special_tokens(vec![(bos_text.clone(), bos)])
        .build()
        .map_err(|e| WeightsError::Tokenizer {
            detail: e.to_string(),
        })?;
    tokenizer.with_post_processor(Some(processor));
    Ok(())
}

/// Token ids that end a generation: the declared EOS plus the chat end-of-turn tokens the vocabulary
/// has. Merging them matters: Qwen's GGUF declares only one of `<|im_end|>`/`<|endoftext|>`, and a
/// server that stops on only one generates past the answer.
pub(crate) fn end_of_turn_ids(md: &HashMap<String, Value>, tokenizer: &Tokenizer) -> Vec<u32> {
    let mut ids: Vec<u32> = optional_u32(md, "tokenizer.ggml.eos_token_id")
        .into_iter()
        .collect();
    for t in [
        "<|im_end|>",
        "<|endoftext|>",
        "<|eot_id|>",
        "<|end_of_text|>",
        "<end_of_turn>",
    ] {
        if let Some(id) = tokenizer.token_to_id(t) {
            ids.push(id);
        }
    }
    ids.sort_unstable();
    ids.dedup();
    ids
}
