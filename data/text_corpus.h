// Text corpora for language-model training: a file, or a directory of text
// files, read whole into memory and tokenized by bytes. Limits: the corpus
// must fit in memory as int32 ids (4 bytes per input byte); for large data
// use pre-tokenized token files (token_file.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace zt::data {

// The corpus `zt train` uses when no --data is given: the Debian package
// `fortunes` (about 5 MB of English text).
inline constexpr char kDefaultTextCorpus[] = "/usr/share/games/fortunes";

// The files LoadTextCorpus reads for `path`, in order. A file is itself. A
// directory gives every regular file directly in it (not recursive), sorted
// by name, except:
//   - files that look binary: a NUL byte in their first 4 KiB (e.g. the
//     fortune `.dat` index files);
//   - a second name of a file already listed (a symlink or hard link to it,
//     e.g. fortunes' `art.u8 -> art`), so no text is read twice.
// Errors (naming the path): missing path, unreadable directory, no text file.
absl::StatusOr<std::vector<std::string>> ListTextCorpusFiles(const std::string& path);

// Byte ids of the corpus at `path` (see ListTextCorpusFiles): the files'
// contents concatenated with one '\n' between consecutive files.
// Errors name the path and say what to do: missing path, unreadable file,
// empty corpus.
absl::StatusOr<std::vector<int32_t>> LoadTextCorpus(const std::string& path);

// LoadTextCorpus(path)->size() from the files' sizes alone (nothing is read
// but the directory and the binary-file probes), with its errors.
absl::StatusOr<int64_t> CountTextCorpusTokens(const std::string& path);

}  // namespace zt::data
