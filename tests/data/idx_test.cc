// IDX files (plain and gzip) read back, malformed files rejected with their
// name, image datasets validated and normalized, MNIST directory resolution,
// and the real Fashion-MNIST test set where its Debian package is installed.
#include "data/idx.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <string>
#include <vector>

#include "data/image_dataset.h"
#include "tests/data/data_test_util.h"

namespace zt::data {
namespace {

using testing::ScratchDir;
using testing::WriteBytes;

std::string IdxBytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data, uint8_t dtype = 0x08) {
  std::string out = {0, 0, static_cast<char>(dtype), static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((d >> shift) & 0xff));
  }
  out.append(data.begin(), data.end());
  return out;
}

void WriteGz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

std::vector<uint8_t> Ramp(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 7);
  return v;
}

TEST(IdxTest, ReadsPlainAndGzip) {
  ScratchDir dir;
  const std::vector<uint8_t> data = Ramp(3 * 4 * 5);
  const std::string bytes = IdxBytes({3, 4, 5}, data);
  WriteBytes(dir.File("x-idx3-ubyte"), bytes);
  WriteGz(dir.File("x-idx3-ubyte.gz"), bytes);
  for (const char* name : {"x-idx3-ubyte", "x-idx3-ubyte.gz"}) {
    SCOPED_TRACE(name);
    auto a = ReadIdx(dir.File(name));
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->dims, (std::vector<int64_t>{3, 4, 5}));
    EXPECT_EQ(a->data, data);
  }
}

TEST(IdxTest, DimsFromTheHeaderAloneEqualTheFullRead) {
  // The header probe gives ReadIdx's dimensions for plain and gzip files,
  // and ReadIdx's header errors; a truncated body is not its to find.
  ScratchDir dir;
  const std::string bytes = IdxBytes({6, 3, 2}, Ramp(36));
  WriteBytes(dir.File("x"), bytes);
  WriteGz(dir.File("x.gz"), bytes);
  WriteBytes(dir.File("short"), bytes.substr(0, bytes.size() - 5));
  for (const char* name : {"x", "x.gz", "short"}) {
    auto dims = ReadIdxDims(dir.File(name));
    ASSERT_TRUE(dims.ok()) << name << ": " << dims.status();
    EXPECT_EQ(*dims, (std::vector<int64_t>{6, 3, 2})) << name;
  }
  EXPECT_EQ(ReadIdx(dir.File("x.gz"))->dims, *ReadIdxDims(dir.File("x.gz")));
  WriteBytes(dir.File("bad"), std::string("\x01\x00\x08\x01", 4));
  auto bad = ReadIdxDims(dir.File("bad"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), ReadIdx(dir.File("bad")).status().message());
  EXPECT_FALSE(ReadIdxDims(dir.File("missing")).ok());
}

TEST(IdxTest, MalformedFilesAreErrorsNamingTheFile) {
  const std::string good = IdxBytes({4, 2}, Ramp(8));
  struct Case {
    const char* name;
    std::string bytes;
    bool gzip;
    const char* expect;
  } cases[] = {
      {"short", std::string("\0\0", 2), false, "shorter than the 4-byte IDX header"},
      {"bad_magic", "PK\x03\x04 not idx", false, "not an IDX file"},
      {"float_dtype", IdxBytes({2}, {0, 0, 0, 0, 0, 0, 0, 0}, 0x0D), false, "0x0d (float32)"},
      {"zero_dims", IdxBytes({}, {}), false, "0 dimensions"},
      {"header_cut", good.substr(0, 9), false, "truncated inside its header"},
      {"data_cut", good.substr(0, good.size() - 3), false, "only 5 follow"},
      {"data_cut.gz", good.substr(0, good.size() - 3), true, "only 5 follow"},
      {"trailing", good + "xy", false, "bytes after"},
  };
  ScratchDir dir;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.File(c.name);
    if (c.gzip) {
      WriteGz(path, c.bytes);
    } else {
      WriteBytes(path, c.bytes);
    }
    auto a = ReadIdx(path);
    ASSERT_FALSE(a.ok());
    const std::string msg(a.status().message());
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.expect), std::string::npos) << msg;
  }
  auto missing = ReadIdx(dir.File("missing"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(dir.File("missing")), std::string::npos);
}

TEST(IdxTest, TruncatedGzipStreamIsAnError) {
  ScratchDir dir;
  WriteGz(dir.File("full.gz"), IdxBytes({64, 8}, Ramp(512)));
  const std::string gz = testing::ReadBytes(dir.File("full.gz"));
  ASSERT_GT(gz.size(), 20u);
  const std::string path = dir.File("cut.gz");
  WriteBytes(path, gz.substr(0, gz.size() / 2));
  auto a = ReadIdx(path);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find(path), std::string::npos) << a.status();
}

TEST(ImageDatasetTest, LoadsNormalizesAndChecksLabels) {
  ScratchDir dir;
  const std::vector<uint8_t> pixels = {0, 255, 128, 64, 10, 20, 30, 40};  // two 2x2 images
  WriteGz(dir.File("img.gz"), IdxBytes({2, 2, 2}, pixels));
  WriteBytes(dir.File("lab"), IdxBytes({2}, {3, 9}));
  auto ds = LoadIdxImages(dir.File("img.gz"), dir.File("lab"));
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->size(), 2);
  EXPECT_EQ(ds->rows(), 2);
  EXPECT_EQ(ds->cols(), 2);
  float out[4];
  int64_t label = -1;
  ds->Fill(0, out, &label);
  EXPECT_EQ(label, 3);
  EXPECT_NEAR(out[0], (0.0f - 0.1307f) / 0.3081f, 1e-6);
  EXPECT_NEAR(out[1], (1.0f - 0.1307f) / 0.3081f, 1e-6);
  EXPECT_NEAR(out[2], (128.0f / 255.0f - 0.1307f) / 0.3081f, 1e-6);
  std::vector<float> batch(8);
  int64_t labels[2];
  const std::vector<int64_t> samples = {1, 0};
  ds->FillBatch(samples, batch.data(), labels);
  EXPECT_EQ(labels[0], 9);
  EXPECT_EQ(labels[1], 3);
  EXPECT_NEAR(batch[4], out[0], 1e-7);
  EXPECT_EQ(ds->raw_pixel(1, 1, 1), 40);

  WriteBytes(dir.File("lab_bad"), IdxBytes({2}, {3, 12}));
  auto bad = LoadIdxImages(dir.File("img.gz"), dir.File("lab_bad"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("label 12"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find(dir.File("lab_bad")), std::string::npos) << bad.status();

  WriteBytes(dir.File("lab3"), IdxBytes({3}, {1, 2, 3}));
  bad = LoadIdxImages(dir.File("img.gz"), dir.File("lab3"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("2 images"), std::string::npos) << bad.status();

  bad = LoadIdxImages(dir.File("lab"), dir.File("lab"));  // 1-D "images"
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("expected 3"), std::string::npos) << bad.status();
}

TEST(ImageDatasetTest, ResolveMnistDirAcceptsGzAndPlainNames) {
  ScratchDir dir;
  auto missing = ResolveMnistDir(dir.path());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("t10k-labels-idx1-ubyte"), std::string::npos) << missing.status();
  WriteBytes(dir.File("train-images-idx3-ubyte.gz"), "x");
  WriteBytes(dir.File("train-labels-idx1-ubyte"), "x");
  WriteBytes(dir.File("t10k-images-idx3-ubyte"), "x");
  missing = ResolveMnistDir(dir.path());
  ASSERT_FALSE(missing.ok());
  const std::string msg(missing.status().message());
  EXPECT_NE(msg.find("t10k-labels-idx1-ubyte"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("train-images"), std::string::npos) << msg;
  WriteBytes(dir.File("t10k-labels-idx1-ubyte.gz"), "x");
  auto files = ResolveMnistDir(dir.path());
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->train_images, dir.File("train-images-idx3-ubyte.gz"));
  EXPECT_EQ(files->train_labels, dir.File("train-labels-idx1-ubyte"));
  EXPECT_EQ(files->test_images, dir.File("t10k-images-idx3-ubyte"));
  EXPECT_EQ(files->test_labels, dir.File("t10k-labels-idx1-ubyte.gz"));
}

TEST(ImageDatasetTest, RealFashionMnistTestSet) {
  auto files = ResolveMnistDir(kFashionMnistDir);
  if (!files.ok()) GTEST_SKIP() << files.status();
  auto ds = LoadIdxImages(files->test_images, files->test_labels);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->size(), 10000);
  EXPECT_EQ(ds->rows(), 28);
  EXPECT_EQ(ds->cols(), 28);
  std::vector<int64_t> per_class(10, 0);
  for (int64_t i = 0; i < ds->size(); ++i) {
    const int64_t l = ds->label(i);
    ASSERT_TRUE(l >= 0 && l < 10) << l;
    ++per_class[l];
  }
  for (int c = 0; c < 10; ++c) EXPECT_GT(per_class[c], 0) << "class " << c;  // every class present
}

}  // namespace
}  // namespace zt::data
