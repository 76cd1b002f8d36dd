// Language-model samples over a token sequence: sample i is the window
// tokens[i*seq_len, i*seq_len + seq_len + 1) of a range of a TokenSource;
// the input is its first seq_len tokens, the target its last seq_len (the
// input shifted by one). Windows do not overlap except for that one token,
// so an epoch sees each token once as an input. Limits: a fixed seq_len.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "data/token_source.h"

namespace zt::data {

// Tokens [begin, end) of a source.
struct TokenRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

struct TrainEvalSplit {
  TokenRange train;
  TokenRange eval;  // at the end of the tokens; empty when eval_fraction is 0
};

// Number of samples of seq_len + 1 tokens a range of n_tokens gives:
// (n_tokens - 1) / seq_len, 0 when n_tokens < seq_len + 1.
int64_t NumTokenSamples(int64_t n_tokens, int64_t seq_len);

// The error for `name` of n_tokens, too short for one sample of seq_len + 1
// tokens, ending in `advice` (what to change).
absl::Status ShorterThanOneSequence(const std::string& name, int64_t n_tokens, int64_t seq_len,
                                    const std::string& advice);

// Splits n_tokens into a train range followed by an eval range of
// round(n_tokens * eval_fraction) tokens (disjoint). eval_fraction must be in
// [0, 1). Errors: a bad fraction; a split with fewer than one sample of
// seq_len + 1 tokens (the train split always, the eval split when nonempty),
// saying which split and what to change.
absl::StatusOr<TrainEvalSplit> SplitTrainEval(int64_t n_tokens, double eval_fraction, int64_t seq_len);

// Samples over `range` of a shared source. Immutable; Fill is thread-safe.
class TokenDataset {
 public:
  // `name` is used in error messages (e.g. "training split of /data/x.bin").
  // Errors: seq_len < 1, a range outside the source, or fewer than one
  // sample ("corpus of N tokens is shorter than one sequence of seq_len+1
  // tokens; lower --seq-len or use more data").
  static absl::StatusOr<TokenDataset> Create(std::shared_ptr<const TokenSource> source, TokenRange range,
                                             int64_t seq_len, const std::string& name = "corpus");
  // The whole source.
  static absl::StatusOr<TokenDataset> Create(std::shared_ptr<const TokenSource> source, int64_t seq_len,
                                             const std::string& name = "corpus");

  int64_t size() const { return num_samples_; }  // number of samples
  int64_t seq_len() const { return seq_len_; }
  TokenRange range() const { return range_; }
  const TokenSource& source() const { return *source_; }

  // Writes sample `sample`'s input and target, seq_len int64 ids each (the
  // dtype LibTorch's embedding and cross-entropy take). 0 <= sample < size().
  void Fill(int64_t sample, int64_t* input, int64_t* target) const;
  // Fill for each of `samples` in order into [batch, seq_len] row-major buffers.
  void FillBatch(absl::Span<const int64_t> samples, int64_t* input, int64_t* target) const;

 private:
  TokenDataset() = default;
  std::shared_ptr<const TokenSource> source_;
  TokenRange range_;
  int64_t seq_len_ = 0;
  int64_t num_samples_ = 0;
};

}  // namespace zt::data
