// The tokenizer a GGUF file describes in its tokenizer.ggml.* metadata, built as the equivalent
// tokenizer.json and loaded by Tokenizer::loadFromString: the same pipeline classes and checks as
// a Hugging Face tokenizer.json (docs/tokenizer.md "GGUF tokenizers").
//
// The pipeline is the one transformers' GGUF converter builds (integrations/ggml.py), with what
// the file states and transformers drops read as llama.cpp reads it:
//   tokenizer.ggml.model "gpt2" (byte-level BPE: tokens, merges "a b"), pre-tokenizer by
//     tokenizer.ggml.pre: gpt-2; smollm, starcoder (digits one by one, then GPT-2's regex);
//     llama-bpe, llama3, llama-v3 (Llama 3's regex, ignore_merges); qwen2, deepseek-r1-qwen
//     (Qwen2's regex and the NFC normalizer). Other names, or none, are refused.
//     general.architecture llama: byte fallback, fused unk (tokenizer.ggml.unknown_token_id),
//     decoder ByteFallback, Fuse, Replace("▁", " "), ByteLevel; qwen2/qwen3: plain BPE, decoder
//     ByteLevel.
//   tokenizer.ggml.model "llama" (SentencePiece-style BPE): normalizer Prepend("▁") (unless
//     tokenizer.ggml.add_space_prefix is false) and Replace(" ", "▁"), byte fallback, fused unk,
//     decoder ByteFallback, Fuse, Replace("▁", " ") and Strip(" ", 1, 0) with the prefix space;
//     merges from tokenizer.ggml.merges, else derived from tokenizer.ggml.scores as transformers
//     derives them.
//   Special tokens: every CONTROL token (tokenizer.ggml.token_type 3) and the bos/eos/unk/pad
//     tokens (tokenizer.ggml.*_token_id) are special added tokens, USER_DEFINED tokens (type 4)
//     added tokens; all matched in the raw text. tokenizer.ggml.add_bos_token / add_eos_token
//     (absent: BOS for "llama" and the Llama 3 names, as llama.cpp) give the post-processor.
//
// Every field is checked before anything is built, each error one line naming the file and the
// key: types, array lengths (token_type and scores as long as tokens), token ids within the
// vocabulary, tokens and merges valid UTF-8 within the tokenizer.json limits, every merge two
// vocabulary tokens whose concatenation is one, scores finite.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ree/core/status.h"
#include "ree/models/gguf.h"
#include "ree/models/tokenizer.h"

namespace ree::models {

// True when `file` has tokenizer metadata (tokenizer.ggml.model).
bool ggufHasTokenizer(const GgufFile& file);

// The tokenizer.json text equivalent to `file`'s tokenizer metadata.
Status ggufTokenizerJson(const GgufFile& file, std::string* json_text);

// The tokenizer of `file`.
Status loadGgufTokenizer(const GgufFile& file, std::unique_ptr<Tokenizer>* tokenizer);
// The tokenizer of the GGUF file `path`; *tokenizer is left null when the file has no tokenizer
// metadata (no tokenizer.ggml.model), as a model directory may have no tokenizer.json.
Status loadGgufTokenizer(const std::string& path, std::unique_ptr<Tokenizer>* tokenizer);

// The ids that end generation: tokenizer.ggml.eos_token_id, eot_token_id (end of turn) and
// eom_token_id (end of message), those present, each once, in that order; each checked against
// the number of tokens.
Status ggufEndTokenIds(const GgufFile& file, std::vector<int64_t>* ids);

}  // namespace ree::models
