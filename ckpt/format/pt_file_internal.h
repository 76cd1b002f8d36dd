// Internal: WritePtFile with the zip writer's knobs exposed, so tests can
// force ZIP64 records without writing 4 GiB.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "ckpt/format/pt_file.h"
#include "ckpt/format/zip.h"

namespace zt::ckpt {

absl::Status WritePtFileWithZipOptions(const std::string& path, const Value& root, const PtWriteOptions& options,
                                       const ZipWriterOptions& zip_options);

}  // namespace zt::ckpt
