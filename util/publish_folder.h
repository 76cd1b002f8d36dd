// The one way a staged folder becomes visible under its final name: the
// protocol of every checkpoint a save or a conversion writes.
//
// A writer fills a staging folder (hidden under a name no reader takes for
// a checkpoint), then PublishFolder moves it to `final_path`: an existing
// folder there first steps aside to `aside` (a rename), the staged folder
// takes the name (a rename), the parent directory is fsynced so that both
// renames survive a crash, and only then is `aside` removed. A reader sees
// the old folder or the new one, never a half-written one; a crash between
// the renames leaves `aside` whole, to be found by its name. The caller
// moves its `latest` pointer after this returns (WriteFileAtomically).
#pragma once

#include <string>

#include "absl/status/status.h"

namespace zt {

// `staged` == `final_path`: the folder was written in place (nothing to
// replace), and only the parent is synced. Errors name the paths. Failing
// to remove `aside` is not an error (the new folder is in place): it is
// logged as a warning naming it.
absl::Status PublishFolder(const std::string& staged, const std::string& final_path, const std::string& aside);

// fsync of a directory, so the renames inside it are durable. Filesystems
// that cannot sync directories (EINVAL) count as success.
absl::Status SyncDirectory(const std::string& dir);

}  // namespace zt
