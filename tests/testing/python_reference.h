// Running a Python reference (Debian's python3-torch) from a test: finding
// an interpreter with torch, and the manifest format the references read
// (tests/models/hf_reference.py's load(): config lines and raw
// little-endian tensors, one file each).
//
//   const std::string py = zt::testing::PythonWithTorch();
//   if (py.empty()) GTEST_SKIP() << "no python3 with torch (set ZT_PYTHON)";
//   { zt::testing::ReferenceDump dump(dir); dump.Config("family", "llama"); dump.Tensor("input", ids); }
//   std::string output;
//   int rc = zt::testing::RunCommand(py + " script.py " + dir, &output);
#pragma once

#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace zt::testing {

// $ZT_PYTHON, python3 or /usr/bin/python3, the first that imports torch;
// "" when none does.
inline std::string PythonWithTorch() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("ZT_PYTHON")) candidates.emplace_back(env);
  candidates.insert(candidates.end(), {"python3", "/usr/bin/python3"});
  for (const std::string& py : candidates) {
    if (std::system((py + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0) return py;
  }
  return "";
}

// Writes DIR/manifest.txt and DIR/<n>.bin (float32 or int64 tensors).
class ReferenceDump {
 public:
  explicit ReferenceDump(const std::filesystem::path& dir) : dir_(dir), manifest_(dir / "manifest.txt") {}
  void Config(const std::string& key, const std::string& value) {
    manifest_ << "config\t" << key << "\t" << value << "\n";
  }
  void Tensor(const std::string& name, const torch::Tensor& t) {
    torch::Tensor c = t.detach().contiguous().cpu();
    const std::string file = std::to_string(count_++) + ".bin";
    std::ofstream out(dir_ / file, std::ios::binary);
    out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.nbytes()));
    std::string shape;
    for (int64_t d : c.sizes()) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    manifest_ << "tensor\t" << name << "\t" << (c.scalar_type() == torch::kLong ? "int64" : "float32") << "\t" << shape
              << "\t" << file << "\n";
  }

 private:
  std::filesystem::path dir_;
  std::ofstream manifest_;
  int count_ = 0;
};

// Runs `cmd` through the shell (stderr joined to stdout); its output into
// `output`, its exit status returned (-1 when it could not start).
inline int RunCommand(const std::string& cmd, std::string* output) {
  FILE* pipe = ::popen((cmd + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[512];
  while (std::fgets(buf, sizeof(buf), pipe) != nullptr) *output += buf;
  return ::pclose(pipe);
}

}  // namespace zt::testing
