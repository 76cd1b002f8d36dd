// Hugging Face tokenizers, loaded from a model's own files:
//   * tokenizer.json (the `tokenizers` library's format), BPE models:
//     byte-level BPE (GPT-2, LLaMA-3, Qwen2/Qwen3) and SentencePiece-style
//     BPE with byte fallback (LLaMA-2, Mistral);
//   * vocab.json + merges.txt (GPT-2's original pair, also OpenAI's
//     encoder.json + vocab.bpe): byte-level BPE with GPT-2's split.
// Encode runs the pipeline tokenizer.json describes: added tokens are cut
// out of the text first (longest match), the rest is normalized (NFC,
// Prepend, Replace), pre-tokenized (Split by a known regex, ByteLevel), run
// through BPE, and the post-processor adds special tokens (TemplateProcessing)
// when asked. Decode inverts it (ByteLevel, or Replace/ByteFallback/Fuse/Strip).
//
// What a tokenizer.json may hold that this does not implement (WordPiece or
// Unigram models, other normalizers or pre-tokenizers, an unknown split
// regex, added tokens with lstrip/rstrip/single_word) is an InvalidArgument
// error naming the file and the JSON key, never a silently different split.
//
// Contract: immutable after Load; Encode and Decode are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "data/bpe.h"
#include "data/pretokenize.h"

namespace zt::data {

class HfTokenizer {
 public:
  // `path`: a tokenizer.json file, or a folder holding tokenizer.json, or
  // vocab.json + merges.txt (encoder.json + vocab.bpe). NotFound naming what
  // was looked for; InvalidArgument naming the file and key for the rest.
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> Load(const std::string& path);

  // Token ids of UTF-8 `text`; with add_special_tokens the post-processor's
  // (e.g. LLaMA-2's <s>). InvalidArgument for malformed UTF-8.
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text, bool add_special_tokens = false) const;
  // The text of `ids` (special tokens included unless skipped). Ids outside
  // the vocabulary are OutOfRange.
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids, bool skip_special_tokens = false) const;

  int32_t vocab_size() const;  // largest id + 1, added tokens included
  // The id of a token string (vocabulary or added), or -1.
  int32_t TokenId(std::string_view token) const;
  // "byte-level BPE (Qwen2 split), 151643 tokens + 26 added, from DIR/tokenizer.json"
  std::string Describe() const;

 private:
  HfTokenizer() = default;
  struct Added {
    std::string content;
    int32_t id = 0;
    bool special = false;
  };
  enum class Decoder { kNone, kByteLevel, kSentencePiece };
  struct Normalizer {
    bool nfc = false;
    std::string prepend;                                     // Prepend
    std::vector<std::pair<std::string, std::string>> replace;  // Replace(String), in order
  };

  friend class HfTokenizerLoader;
  // Fills added_first_byte_ once added_ is complete.
  void IndexAdded();
  // Encodes text that holds no added token.
  absl::Status EncodeSection(std::string_view text, std::vector<int32_t>* ids) const;

  std::optional<Bpe> bpe_;
  std::vector<Added> added_;  // longest content first
  bool added_first_byte_[256] = {};  // bytes an added token starts with: Encode looks only there
  Normalizer normalizer_;
  std::optional<SplitPattern> split_;
  bool byte_level_ = false;
  bool add_prefix_space_ = false;
  std::vector<int32_t> prefix_ids_, suffix_ids_;  // TemplateProcessing's single sequence
  Decoder decoder_ = Decoder::kNone;
  int strip_start_ = 0;  // SentencePiece decoder: leading spaces to strip
  std::string source_;
};

}  // namespace zt::data
