// Helpers shared by the ckpt tests: a scratch directory, whole-file I/O, a
// canonical text form of Value trees (tensors by dtype, shape and bytes) to
// compare what was written with what was read, and the Python runner the
// interop tests use (skipped where no Python with torch is installed).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ckpt/format/pt_file.h"
#include "ckpt/format/value.h"
#include "tests/testing/scratch_dir.h"
#include "util/file_io.h"

namespace zt::ckpt::testing {

class ScratchDir : public zt::testing::ScratchDir {
 public:
  ScratchDir() : zt::testing::ScratchDir("zt_ckpt") {}
};

inline std::string ReadAll(const std::string& path) { return zt::testing::ReadFileBytes(path); }
inline void WriteAll(const std::string& path, const std::string& bytes) { zt::testing::WriteFileBytes(path, bytes); }

inline std::string Hex(const void* data, size_t n) {
  std::string s;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) absl::StrAppendFormat(&s, "%02x", p[i]);
  return s;
}

// Canonical text of a tree. Tensors print dtype, shape and their bytes'
// hex: from `data` when reader is null (the written tree), else read back
// through the reader (with CRC verification).
inline std::string Describe(const Value& v, const PtReader* reader = nullptr) {
  if (v.is_none()) return "None";
  if (v.is_bool()) return v.AsBool() ? "True" : "False";
  if (v.is_int()) return absl::StrCat(v.AsInt());
  if (v.is_double()) return absl::StrFormat("%a", v.AsDouble());
  if (v.is_string()) return absl::StrCat("'", Hex(v.AsString().data(), v.AsString().size()), "'");
  if (v.is_list() || v.is_tuple()) {
    std::string s = v.is_list() ? "[" : "(";
    for (const Value& x : v.AsList()) absl::StrAppend(&s, Describe(x, reader), ",");
    return s + (v.is_list() ? "]" : ")");
  }
  if (v.is_dict()) {
    std::string s = v.AsDict().ordered ? "OrderedDict{" : "{";
    for (const auto& [k, x] : v.AsDict().items) absl::StrAppend(&s, Describe(k), ": ", Describe(x, reader), ", ");
    return s + "}";
  }
  const TensorRef& t = v.AsTensor();
  std::string bytes;
  if (reader == nullptr) {
    bytes = Hex(t.data, t.nbytes());
  } else {
    std::string buf(t.nbytes(), '\0');
    absl::Status st = reader->Read(t, buf.data());
    if (!st.ok()) return absl::StrCat("<read error: ", st.ToString(), ">");
    bytes = Hex(buf.data(), buf.size());
  }
  std::string shape;
  for (int64_t d : t.shape) absl::StrAppend(&shape, d, ",");
  return absl::StrCat("tensor(", std::string(DTypeName(t.dtype)), ", [", shape, "], ", bytes, ")");
}

// Python literal of a written tree for the interop scripts; tensors become
// T(dtype, shape, hex) (a helper the script defines).
inline std::string PyLiteral(const Value& v) {
  if (v.is_none()) return "None";
  if (v.is_bool()) return v.AsBool() ? "True" : "False";
  if (v.is_int()) return absl::StrCat(v.AsInt());
  if (v.is_double()) {
    double d = v.AsDouble();
    if (std::isnan(d)) return "float('nan')";
    if (std::isinf(d)) return d > 0 ? "float('inf')" : "float('-inf')";
    return absl::StrFormat("float.fromhex('%a')", d);
  }
  if (v.is_string()) {
    return absl::StrCat("bytes.fromhex('", Hex(v.AsString().data(), v.AsString().size()), "').decode('utf-8')");
  }
  if (v.is_list()) {
    std::string s = "[";
    for (const Value& x : v.AsList()) absl::StrAppend(&s, PyLiteral(x), ", ");
    return s + "]";
  }
  if (v.is_tuple()) {
    std::string s = "(";
    for (const Value& x : v.AsList()) absl::StrAppend(&s, PyLiteral(x), ", ");
    return s + ")";
  }
  if (v.is_dict()) {
    std::string s = v.AsDict().ordered ? "collections.OrderedDict([" : "dict([";
    for (const auto& [k, x] : v.AsDict().items) absl::StrAppend(&s, "(", PyLiteral(k), ", ", PyLiteral(x), "), ");
    return s + "])";
  }
  const TensorRef& t = v.AsTensor();
  std::string shape;
  for (int64_t d : t.shape) absl::StrAppend(&shape, d, ", ");
  return absl::StrCat("T('", std::string(DTypeName(t.dtype)), "', [", shape, "], '", Hex(t.data, t.nbytes()), "')");
}

// A Python interpreter that can `import torch`: $ZT_PYTHON, python3 or
// /usr/bin/python3 (Debian's python3-torch), or nullopt.
// Runs `body` in a child process whose files may not grow past `limit`
// bytes (writes past it fail with EFBIG, "File too large", as on a full
// disk; SIGXFSZ ignored), so the limit does not leak into the test process.
// The child's exit code is body's result (10 when setrlimit failed); -1
// when the child could not run or did not exit normally.
inline int ExitCodeUnderFileSizeLimit(rlim_t limit, const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    const struct rlimit l = {limit, limit};
    if (::setrlimit(RLIMIT_FSIZE, &l) != 0) ::_exit(10);
    ::_exit(body());
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

inline std::optional<std::string> PythonWithTorch() {
  static const std::optional<std::string> found = []() -> std::optional<std::string> {
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("ZT_PYTHON")) candidates.push_back(env);
    candidates.push_back("python3");
    candidates.push_back("/usr/bin/python3");
    for (const std::string& py : candidates) {
      std::string cmd = absl::StrCat(py, " -c 'import torch, numpy' >/dev/null 2>&1");
      if (std::system(cmd.c_str()) == 0) return py;
    }
    return std::nullopt;
  }();
  return found;
}

// Runs `script` (Python source) with `python`; returns the exit code and
// fills `output` with stdout and stderr.
inline int RunPython(const std::string& python, const ScratchDir& dir, const std::string& script, std::string* output) {
  const std::string script_path = dir.File("script.py");
  const std::string out_path = dir.File("script.out");
  WriteAll(script_path, script);
  std::string cmd = absl::StrCat("PYTHONDONTWRITEBYTECODE=1 ", python, " ", script_path, " >", out_path, " 2>&1");
  int rc = std::system(cmd.c_str());
  *output = ReadAll(out_path);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

#define ZT_SKIP_WITHOUT_TORCH_PYTHON()                                                                 \
  do {                                                                                                 \
    if (!::zt::ckpt::testing::PythonWithTorch()) {                                                     \
      GTEST_SKIP() << "no Python with torch and numpy (tried $ZT_PYTHON, python3, /usr/bin/python3); " \
                      "install python3-torch to run the interop tests";                                \
    }                                                                                                  \
  } while (0)

}  // namespace zt::ckpt::testing
