// What a built-in model is, without building it: its task, input limits and
// parameter count (models/catalog/catalog.h's DescribeModel). No LibTorch.
#pragma once

#include <cstdint>
#include <string>

namespace zt::models {

// kSequenceClassification: an encoder with a classification head (BERT),
// one label per token sequence.
enum class Task { kLanguageModel, kImageClassification, kSequenceClassification };

// What a model is, without building it (registry.h's DescribeModel).
struct ModelInfo {
  std::string name;  // the preset, e.g. "gpt2-tiny"
  Task task = Task::kLanguageModel;
  int64_t vocab_size = 0;   // language models and sequence classifiers
  int64_t max_seq_len = 0;  // language models and sequence classifiers: longest input Forward accepts
  int64_t num_classes = 0;  // image and sequence classifiers: labels 0..num_classes-1
  int64_t image_size = 0;   // image classifiers: square inputs of this side
  int64_t num_params = 0;   // analytic count; a tied weight counts once
};

// "1.2M", "124.4M", "1.56B": a parameter count for help text.
std::string FormatCount(int64_t n);

}  // namespace zt::models
