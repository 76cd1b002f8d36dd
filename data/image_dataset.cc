// ImageDataset: IDX image/label pairs validated against each other, and the
// MNIST directory layout.
#include "data/image_dataset.h"

#include <sys/stat.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/idx.h"
#include "util/status.h"

namespace zt::data {

absl::StatusOr<ImageDataset> ImageDataset::Create(std::vector<uint8_t> images, std::vector<uint8_t> labels,
                                                  int64_t rows, int64_t cols, const std::string& name) {
  if (rows < 1 || cols < 1) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": images of ", rows, "x", cols, " pixels"));
  }
  const int64_t n = static_cast<int64_t>(labels.size());
  if (static_cast<int64_t>(images.size()) != n * rows * cols) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", images.size(), " pixel bytes are not ", n, " images of ",
                                                   rows, "x", cols, " (one per label)"));
  }
  auto max_it = std::max_element(labels.begin(), labels.end());
  if (max_it != labels.end() && *max_it >= kMnistClasses) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": label ", static_cast<int>(*max_it), " at sample ",
                                                   max_it - labels.begin(), " is outside 0..", kMnistClasses - 1,
                                                   " (the largest label in the file)"));
  }
  ImageDataset dataset;
  dataset.images_ = std::move(images);
  dataset.labels_ = std::move(labels);
  dataset.rows_ = rows;
  dataset.cols_ = cols;
  return dataset;
}

uint8_t ImageDataset::raw_pixel(int64_t sample, int64_t row, int64_t col) const {
  ZT_CHECK(sample >= 0 && sample < size() && row >= 0 && row < rows_ && col >= 0 && col < cols_);
  return images_[static_cast<size_t>((sample * rows_ + row) * cols_ + col)];
}

int64_t ImageDataset::label(int64_t sample) const {
  ZT_CHECK(sample >= 0 && sample < size());
  return labels_[static_cast<size_t>(sample)];
}

void ImageDataset::Fill(int64_t sample, float* pixels, int64_t* label) const {
  ZT_CHECK(sample >= 0 && sample < size());
  const int64_t n = pixels_per_image();
  const uint8_t* src = images_.data() + sample * n;
  for (int64_t i = 0; i < n; ++i) pixels[i] = (static_cast<float>(src[i]) / 255.0f - kMnistMean) / kMnistStd;
  *label = labels_[static_cast<size_t>(sample)];
}

void ImageDataset::FillBatch(absl::Span<const int64_t> samples, float* pixels, int64_t* labels) const {
  for (size_t b = 0; b < samples.size(); ++b) Fill(samples[b], pixels + b * pixels_per_image(), labels + b);
}

absl::StatusOr<ImageDataset> LoadIdxImages(const std::string& images_path, const std::string& labels_path) {
  ZT_ASSIGN_OR_RETURN(IdxArray images, ReadIdx(images_path));
  ZT_ASSIGN_OR_RETURN(IdxArray labels, ReadIdx(labels_path));
  if (images.dims.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat("IDX images file '", images_path, "' has ", images.dims.size(),
                                                   " dimensions; expected 3 (count, rows, cols)"));
  }
  if (labels.dims.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("IDX labels file '", labels_path, "' has ", labels.dims.size(),
                                                   " dimensions; expected 1 (count)"));
  }
  if (images.dims[0] != labels.dims[0]) {
    return absl::InvalidArgumentError(absl::StrCat("IDX images file '", images_path, "' holds ", images.dims[0],
                                                   " images but labels file '", labels_path, "' holds ", labels.dims[0],
                                                   " labels; use files of the same split"));
  }
  return ImageDataset::Create(std::move(images.data), std::move(labels.data), images.dims[1], images.dims[2],
                              absl::StrCat("IDX labels file '", labels_path, "'"));
}

absl::StatusOr<MnistFiles> ResolveMnistDir(const std::string& dir) {
  std::vector<std::string> missing;
  auto find = [&](const std::string& stem) {
    for (const std::string& candidate : {absl::StrCat(dir, "/", stem, ".gz"), absl::StrCat(dir, "/", stem)}) {
      struct stat sb;
      if (::stat(candidate.c_str(), &sb) == 0 && S_ISREG(sb.st_mode)) return candidate;
    }
    missing.push_back(absl::StrCat(stem, "[.gz]"));
    return std::string();
  };
  MnistFiles files;
  files.train_images = find("train-images-idx3-ubyte");
  files.train_labels = find("train-labels-idx1-ubyte");
  files.test_images = find("t10k-images-idx3-ubyte");
  files.test_labels = find("t10k-labels-idx1-ubyte");
  if (!missing.empty()) {
    std::string hint = dir == kFashionMnistDir
                           ? "install the Debian package dataset-fashion-mnist (scripts/setup.sh does)"
                           : "point --data at a directory holding MNIST-format IDX files";
    return absl::NotFoundError(
        absl::StrCat("MNIST-style directory '", dir, "' lacks ", absl::StrJoin(missing, ", "), "; ", hint));
  }
  return files;
}

}  // namespace zt::data
