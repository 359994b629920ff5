//! Incremental detokenization: text deltas for a stream of generated token ids.
//!
//! Decoding token by token goes wrong in two ways. A byte-level BPE token can hold part of a
//! multi-byte character, so its text alone is invalid UTF-8 (decoded as U+FFFD); and some
//! decoders change a token's text depending on what precedes it (leading-space handling), so
//! the concatenated per-token decodes differ from the full decode. The prefix-offset /
//! read-offset technique fixes both: decode a short window that starts a few tokens before the
//! unread ones, emit only what the window adds beyond its already-read prefix, and wait while
//! the window ends in U+FFFD.

use std::sync::Arc;

use thiserror::Error;
use tokenizers::Tokenizer;

/// Prompt tokens kept as context for the first generated token. A few tokens are enough for
/// decoders that look at their neighbours, and decoding stays O(window) rather than O(prompt).
const PROMPT_CONTEXT_TOKENS: usize = 5;

/// Once this many already-emitted tokens precede the window they are dropped, so a long
/// generation keeps a small buffer instead of every token it produced.
const COMPACT_AFTER: usize = 64;

/// A decoding failure from the tokenizer.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DetokenizerError {
    #[error("decoding {n_tokens} tokens failed: {detail}")]
    Decode { n_tokens: usize, detail: String },
}

impl DetokenizerError {
    /// A stable label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            DetokenizerError::Decode { .. } => "decode",
        }
    }
}

/// Per-sequence incremental decoder. The deltas it returns, followed by `finish`, concatenate
/// to exactly the decode of all generated tokens (with the same `skip_special_tokens`).
pub struct Detokenizer {
    tokenizer: Arc<Tokenizer>,
    skip_special_tokens: bool,
    /// The prompt's context tail followed by the generated tokens not yet compacted away.
    tokens: Vec<u32>,
    /// Start of the decode window: tokens before it are only context already accounted for.
    prefix_offset: usize,
    /// Tokens before this have been emitted as text.
    read_offset: usize,
}

impl Detokenizer {
    /// Starts decoding the generation that follows `prompt`. Only the prompt's last tokens are
    /// kept: they give the first generated token its left context but are never emitted.
    pub fn new(tokenizer: Arc<Tokenizer>, prompt: &[u32], skip_special_tokens: bool) -> Self {
        let context = &prompt[prompt.len().saturating_sub(PROMPT_CONTEXT_TOKENS)..];
        Detokenizer {
            tokenizer,
            skip_special_tokens,
            tokens: context.to_vec(),
            prefix_offset: 0,
            read_offset: context.len(),
        }
    }

    /// Adds one generated token and returns the text it completes, which may be empty while a
    /// multi-byte character is still incomplete.
    pub fn step(&mut self, token: u32) -> Result<String, DetokenizerError> {
        self.tokens.push(token);
        let prefix = self.decode(self.prefix_offset, self.read_offset)?;
        let window = self.decode(self.prefix_offset, self.tokens.len())?;
        if window.ends_with(char::REPLACEMENT_CHARACTER) {
            return Ok(String::new());
        }
        // The window extends the prefix byte for byte for byte-level decoders; when a decoder
        // rewrites the prefix (or the window is not longer yet), wait for more tokens rather
        // than emit text that would not concatenate to the full decode.
        let Some(delta) = window
            .strip_prefix(prefix.as_str())
            .filter(|d| !d.is_empty())
        else {
            return Ok(String::new());
        };
        let delta = delta.to_string();
        self.prefix_offset = self.read_offset;
        self.read_offset = self.tokens.len();
        self.compact();
        Ok(delta)
    }

    /// Returns whatever text is still held back (an incomplete character decodes as U+FFFD),
    /// for when the sequence ends; deltas plus this equal the full decode.
    pub fn finish(&mut self) -> Result<String, DetokenizerError> {
        let prefix = self.decode(self.prefix_offset, self.read_offset)?;
        let window = self.decode(self.prefix_offset, self.tokens.len())?;
        self.prefix_offset = self.read_offset;
        self.read_offset = self.tokens.len();
        Ok(match window.strip_prefix(prefix.as_str()) {
            Some(rest) => rest.to_string(),
            None => window,
        })
    }

    fn decode(&self, start: usize, end: usize) -> Result<String, DetokenizerError> {
        let ids = &self.tokens[start..end];
        self.tokenizer
            .decode(ids, self.skip_special_tokens)
            .map_err(|e| DetokenizerError::Decode {
                n_tokens: ids.len(),
                detail: e.to_string(),
            })
    }

    fn compact(&mut self) {
        if self.prefix_offset >= COMPACT_AFTER {
            self.tokens.drain(..self.prefix_offset);
            self.read_offset -= self.prefix_offset;
            self.prefix_offset = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
    use tokenizers::models::bpe::{BPE, Vocab};
    use tokenizers::pre_tokenizers::byte_level::ByteLevel;
    use tokenizers::{AddedToken, Tokenizer};

    use super::*;

    /// A byte-level BPE over the 256 byte symbols plus a few merges: "é" becomes one token,
    /// while "🦀" and "中" stay split into byte tokens, so characters straddle tokens.
    fn tiny_tokenizer() -> Arc<Tokenizer> {
        let mut alphabet: Vec<char> = ByteLevel::alphabet().into_iter().collect();
        alphabet.sort_unstable();
        let mut vocab: Vocab = alphabet
            .iter()
            .enumerate()
            .map(|(i, c)| (c.to_string(), i as u32))
            .collect();
        let merges: Vec<(String, String)> = [("Ã", "©"), ("Ġ", "S"), ("l", "e"), ("Ġ", "x")]
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        for (a, b) in &merges {
            let next = vocab.len() as u32;
            vocab.insert(format!("{a}{b}"), next);
        }
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .expect("valid BPE");
        let mut tokenizer = Tokenizer::new(bpe);
        tokenizer.with_pre_tokenizer(Some(ByteLevel::new(false, true, true)));
        tokenizer.with_decoder(Some(ByteLevelDecoder::new(false, false, false)));
        tokenizer
            .add_special_tokens([AddedToken::from("<|im_end|>", true)])
            .expect("special token added");
        Arc::new(tokenizer)
    }

    fn encode(t: &Tokenizer, text: &str) -> Vec<u32> {
        t.encode(text, false).expect("encodes").get_ids().to_vec()
    }

    fn stream(t: &Arc<Tokenizer>, prompt: &[u32], ids: &[u32], skip: bool) -> Vec<String> {
        let mut d = Detokenizer::new(t.clone(), prompt, skip);
        let mut deltas: Vec<String> = ids.iter().map(|&id| d.step(id).expect("ok")).collect();
        deltas.push(d.finish().expect("ok"));
        deltas
    }

    #[test]
    fn multibyte_characters_are_never_split() {
        let t = tiny_tokenizer();
        let text = "Salut 🦀 le crabe, café 中文 x";
        let ids = encode(&t, text);
        assert!(ids.len() > text.chars().count(), "characters span tokens");
        let deltas = stream(&t, &[], &ids, true);
        for d in &deltas {
            assert!(!d.contains(char::REPLACEMENT_CHARACTER), "{deltas:?}");
        }
        assert_eq!(deltas.concat(), text);
        assert_eq!(deltas.last().map(String::as_str), Some(""));
        // The crab's four byte tokens produce one delta, on the last of them.
        let crab = deltas.iter().filter(|d| d.contains('🦀')).count();
        assert_eq!(crab, 1);
    }

    #[test]
    fn prompt_context_is_not_emitted() {
        let t = tiny_tokenizer();
        let prompt = encode(&t, "a long prompt ending in é");
        let ids = encode(&t, " SELECT x");
        assert_eq!(stream(&t, &prompt, &ids, true).concat(), " SELECT x");
    }

    #[test]
    fn special_tokens_follow_the_skip_flag() {
        let t = tiny_tokenizer();
        let mut ids = encode(&t, "ok");
        ids.push(t.token_to_id("<|im_end|>").expect("special token"));
        assert_eq!(stream(&t, &[], &ids, true).concat(), "ok");
        assert_eq!(stream(&t, &[], &ids, false).concat(), "ok<|im_end|>");
    }

    #[test]
    fn incomplete_tail_is_released_by_finish() {
        let t = tiny_tokenizer();
        let crab = encode(&t, "🦀");
        let mut ids = encode(&t, "a");
        ids.extend_from_slice(&crab[..2]);
        let deltas = stream(&t, &[], &ids, true);
        assert_eq!(deltas[..deltas.len() - 1].concat(), "a");
        let full = t.decode(&ids, true).expect("decodes");
        assert_eq!(deltas.concat(), full);
        assert!(full.ends_with(char::REPLACEMENT_CHARACTER));
    }

    #[test]
    fn long_generations_compact_their_buffer() {
        let t = tiny_tokenizer();
        let text = "é🦀 x".repeat(100);
        let ids = encode(&t, &text);
        let mut d = Detokenizer::new(t.clone(), &[], true);
        let mut out = String::new();
        for &id in &ids {
            out.push_str(&d.step(id).expect("ok"));
            assert!(d.tokens.len() <= COMPACT_AFTER + 8);
        }
        out.push_str(&d.finish().expect("ok"));
        assert_eq!(out, text);
    }

    proptest! {
        #[test]
        fn deltas_concatenate_to_the_full_decode(
            prompt in "[a-zé🦀中 ]{0,10}",
            text in "[a-zé🦀中 \n]{0,40}",
        ) {
            let t = tiny_tokenizer();
            let prompt = encode(&t, &prompt);
            let ids = encode(&t, &text);
            let deltas = stream(&t, &prompt, &ids, true);
            prop_assert_eq!(deltas.concat(), text);
            for d in &deltas {
                prop_assert!(!d.contains(char::REPLACEMENT_CHARACTER));
            }
        }

        #[test]
        fn arbitrary_token_streams_match_the_full_decode(
            ids in prop::collection::vec(0u32..262, 0..40),
        ) {
            let t = tiny_tokenizer();
            let deltas = stream(&t, &[], &ids, true);
            prop_assert_eq!(deltas.concat(), t.decode(&ids, true).expect("decodes"));
        }
    }
}
