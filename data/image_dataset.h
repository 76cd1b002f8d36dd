// Image classification data from IDX files (MNIST, Fashion-MNIST): uint8
// images of rows x cols with one uint8 label each, normalized to float on
// Fill. Limits: 10 classes, one channel, everything in memory (Fashion-MNIST's
// train set is 47 MB).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace zt::data {

// Where the Debian package `dataset-fashion-mnist` installs Fashion-MNIST.
inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

// Pixel normalization Fill applies: (p / 255 - kMean) / kStd, the constants of
// the PyTorch MNIST example (MNIST's pixel mean and std; used unchanged for
// Fashion-MNIST, as that example is commonly reused).
inline constexpr float kMnistMean = 0.1307f;
inline constexpr float kMnistStd = 0.3081f;
inline constexpr int kMnistClasses = 10;

class ImageDataset {
 public:
  ImageDataset() = default;
  // From uint8 images [n, rows, cols] and labels [n]. Errors (naming `name`):
  // sizes that disagree, a label >= kMnistClasses (the largest is reported).
  static absl::StatusOr<ImageDataset> Create(std::vector<uint8_t> images, std::vector<uint8_t> labels, int64_t rows,
                                             int64_t cols, const std::string& name);

  int64_t size() const { return static_cast<int64_t>(labels_.size()); }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t pixels_per_image() const { return rows_ * cols_; }
  int num_classes() const { return kMnistClasses; }
  uint8_t raw_pixel(int64_t sample, int64_t row, int64_t col) const;
  int64_t label(int64_t sample) const;

  // Writes image `sample` as rows*cols floats, each (p / 255 - kMnistMean) /
  // kMnistStd, and its label. 0 <= sample < size(). Thread-safe.
  void Fill(int64_t sample, float* pixels, int64_t* label) const;
  // Fill for each of `samples` into [batch, rows*cols] and [batch].
  void FillBatch(absl::Span<const int64_t> samples, float* pixels, int64_t* labels) const;

 private:
  std::vector<uint8_t> images_;
  std::vector<uint8_t> labels_;
  int64_t rows_ = 0, cols_ = 0;
};

// Reads an images file ([n, rows, cols]) and a labels file ([n]) in IDX
// format (plain or .gz). Errors name the files: see ReadIdx, plus image
// arrays that are not 3-D, label arrays that are not 1-D, counts that differ,
// labels >= 10.
absl::StatusOr<ImageDataset> LoadIdxImages(const std::string& images_path, const std::string& labels_path);

// The four files of an MNIST-style directory.
struct MnistFiles {
  std::string train_images, train_labels, test_images, test_labels;
};

// Finds {train,t10k}-{images-idx3,labels-idx1}-ubyte in `dir`, each as
// `.gz` or uncompressed (the .gz is preferred when both exist). Errors name
// every missing file and, for kFashionMnistDir, the Debian package to install.
absl::StatusOr<MnistFiles> ResolveMnistDir(const std::string& dir);

}  // namespace zt::data
