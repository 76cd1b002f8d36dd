// Hugging Face tokenizers, loaded from a model's own files:
//   * tokenizer.json (the `tokenizers` library's format) with a BPE model:
//     byte-level BPE (GPT-2, LLaMA-3, Qwen2/Qwen3) and SentencePiece-style
//     BPE with byte fallback (LLaMA-2, Mistral);
//   * tokenizer.json with a WordPiece model: BERT's pipeline (BertNormalizer,
//     BertPreTokenizer, BertProcessing or TemplateProcessing, the WordPiece
//     decoder), as bert-base-uncased ships it;
//   * vocab.json + merges.txt (GPT-2's original pair, also OpenAI's
//     encoder.json + vocab.bpe): byte-level BPE with GPT-2's split;
//   * llama2.c's tokenizer.bin (tok512.bin ...; tokenizer/llama2c_tokenizer.h),
//     any file that is not JSON: encoded and decoded as llama2.c's run.c does,
//     BOS (1) as the special token Encode adds, "<unk>", "<s>" and "</s>"
//     naming ids 0, 1 and 2.
// Encode runs the pipeline tokenizer.json describes: added tokens are cut
// out of the text first (longest match), the rest is normalized (NFC, NFD,
// Lowercase, StripAccents, Prepend, Replace, BertNormalizer; as listed),
// pre-tokenized (Split by a known regex, ByteLevel, BertPreTokenizer), run
// through the model, and the post-processor adds special tokens
// (TemplateProcessing, BertProcessing) when asked. Decode inverts it
// (ByteLevel, Replace/ByteFallback/Fuse/Strip, or WordPiece: pieces joined
// by spaces, "##" pieces glued on, " ." -> "." and the like cleaned up).
// Unicode properties, case mapping and NFC/NFD come from ICU; BERT's
// character classes are the `tokenizers` library's (Rust source), which is
// what tokenizer.json means where BERT's original Python differs.
//
// What a tokenizer.json may hold that this does not implement (Unigram
// models, other normalizers or pre-tokenizers, an unknown split regex, added
// tokens with lstrip/rstrip/single_word) is an InvalidArgument error naming
// the file and the JSON key, never a silently different split.
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
#include "tokenizer/bpe.h"
#include "tokenizer/llama2c_tokenizer.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/wordpiece.h"

namespace zt::data {

class HfTokenizer {
 public:
  // `path`: a tokenizer.json file, or a folder holding tokenizer.json, or
  // vocab.json + merges.txt (encoder.json + vocab.bpe). NotFound naming what
  // was looked for; InvalidArgument naming the file and key for the rest.
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> Load(const std::string& path);

  // Which files Load would read for `path`, without reading them: the
  // tokenizer.json, or vocab + merges. The same NotFound errors as Load.
  struct Files {
    std::string json;           // empty when vocab + merges
    std::string vocab, merges;  // GPT-2's pair (or encoder.json + vocab.bpe)
  };
  static absl::StatusOr<Files> Locate(const std::string& path);

  // Token ids of UTF-8 `text`; with add_special_tokens the post-processor's
  // (e.g. LLaMA-2's <s>). InvalidArgument for malformed UTF-8.
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text, bool add_special_tokens = false) const;
  // The text of `ids` (special tokens included unless skipped). Ids outside
  // the vocabulary are OutOfRange.
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids, bool skip_special_tokens = false) const;

  int32_t vocab_size() const;  // largest id + 1, added tokens included
  // A llama2.c tokenizer.bin (whose models end a text at BOS, as run.c does).
  bool is_llama2c() const { return llama2c_.has_value(); }
  // The id of a token string (vocabulary or added), or -1.
  int32_t TokenId(std::string_view token) const;
  // "byte-level BPE (Qwen2 split), 151643 tokens + 26 added, from DIR/tokenizer.json",
  // "WordPiece (BERT, lowercase), 30522 tokens + 5 added, from DIR/tokenizer.json"
  std::string Describe() const;

 private:
  HfTokenizer() = default;
  struct Added {
    std::string content;
    int32_t id = 0;
    bool special = false;
  };
  enum class Decoder { kNone, kByteLevel, kSentencePiece, kWordPiece };
  // One normalizer of the (flattened) sequence, applied in order.
  struct NormalizeStep {
    enum Kind {
      kNfc,
      kNfd,
      kLowercase,    // per character, as Rust's char::to_lowercase (no final-sigma context)
      kStripMarks,   // drops nonspacing marks (Mn); StripAccents, after an NFD
      kPrepend,      // `text` before a non-empty section
      kReplace,      // every `text` -> `with`
      kBertClean,    // BertNormalizer clean_text
      kBertChinese,  // BertNormalizer handle_chinese_chars
    } kind;
    std::u32string text, with;
  };

  friend class HfTokenizerLoader;
  // Fills added_first_byte_ once added_ is complete.
  void IndexAdded();
  // Encodes text that holds no added token.
  absl::Status EncodeSection(std::string_view text, std::vector<int32_t>* ids) const;
  // The model's vocabulary (BPE or WordPiece), added tokens aside.
  int32_t ModelVocabSize() const;
  const std::string& ModelToken(int32_t id) const;
  int32_t ModelId(std::string_view token) const;

  std::optional<Bpe> bpe_;  // exactly one of bpe_, wordpiece_ and llama2c_ is set
  std::optional<Llama2cTokenizer> llama2c_;
  std::optional<WordPiece> wordpiece_;
  std::vector<Added> added_;         // longest content first
  bool added_first_byte_[256] = {};  // bytes an added token starts with: Encode looks only there
  std::vector<NormalizeStep> normalizer_;
  std::optional<SplitPattern> split_;
  bool bert_split_ = false;  // BertPreTokenizer: whitespace, and each punctuation character alone
  bool byte_level_ = false;
  bool add_prefix_space_ = false;
  std::vector<int32_t> prefix_ids_, suffix_ids_;  // TemplateProcessing's single sequence
  Decoder decoder_ = Decoder::kNone;
  int strip_start_ = 0;                  // SentencePiece decoder: leading spaces to strip
  std::string wordpiece_prefix_ = "##";  // WordPiece decoder
  bool wordpiece_cleanup_ = true;
  std::string source_;
};

}  // namespace zt::data
