// offload/swap_file.h: every check SwapFile::Create makes (missing directory,
// not a directory, unwritable, no O_DIRECT, no room, an existing name), the
// reservation itself, the name vanishing at once and with a killed process,
// and the errno mappings that cannot be produced on demand (through
// swap_file_internal.h). Mount-based cases run in a child with its own mount
// namespace and skip where mounting is not permitted.
#include "offload/swap_file.h"

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "offload/aligned_buffer.h"
#include "offload/io_engine.h"
#include "offload/swap_file_internal.h"
#include "tests/offload/offload_test_util.h"
#include "tests/testing/scratch_dir.h"

namespace zt::offload {
namespace {

using testing::ChildResult;
using testing::Report;
using testing::RunInChild;
using zt::testing::ScratchDir;

constexpr int kSkip = 77;  // a child's "not permitted here"

bool Contains(const absl::Status& s, const std::string& text) { return absl::StrContains(s.message(), text); }

TEST(SwapFile, CreateReservesUnlinksAndReadsZeros) {
  ScratchDir dir("zt_swap");
  auto file = SwapFile::Create(dir.path(), "states.swp", 5 << 20);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->size(), uint64_t{5} << 20);
  EXPECT_EQ(file->path(), dir.File("states.swp"));
  EXPECT_TRUE(dir.List().empty()) << "the swap file must be unlinked as soon as it is open";

  struct stat st;
  ASSERT_EQ(::fstat(file->fd(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), file->size());
  EXPECT_GE(static_cast<uint64_t>(st.st_blocks) * 512, file->size()) << "the whole size must be allocated up front";
  EXPECT_EQ(st.st_nlink, 0u);
  EXPECT_NE(::fcntl(file->fd(), F_GETFL) & O_DIRECT, 0);

  auto buffer = AlignedBuffer::Allocate(file->size());
  ASSERT_TRUE(buffer.ok());
  std::memset(buffer->data(), 0x5a, buffer->size());
  ASSERT_EQ(::pread(file->fd(), buffer->data(), buffer->size(), 0), static_cast<ssize_t>(buffer->size()));
  const auto* p = static_cast<const unsigned char*>(buffer->data());
  for (size_t i = 0; i < buffer->size(); ++i) ASSERT_EQ(p[i], 0) << "offset " << i;
}

TEST(SwapFile, SizeIsRoundedUpAndTrailingSlashesIgnored) {
  ScratchDir dir("zt_swap");
  auto file = SwapFile::Create(dir.path() + "//", "a", 5000);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->size(), 8192u);
  EXPECT_EQ(file->path(), dir.File("a"));
  SwapFile moved = std::move(file).value();
  EXPECT_GE(moved.fd(), 0);
  EXPECT_EQ(moved.size(), 8192u);
}

TEST(SwapFile, MissingDirectoryIsNotFound) {
  ScratchDir dir("zt_swap");
  const std::string missing = dir.File("no/such/dir");
  auto file = SwapFile::Create(missing, "x.swp", 1 << 20);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound) << file.status();
  EXPECT_TRUE(Contains(file.status(), missing)) << file.status();
  EXPECT_TRUE(Contains(file.status(), "does not exist")) << file.status();
}

TEST(SwapFile, ARegularFileIsNotADirectory) {
  ScratchDir dir("zt_swap");
  const std::string regular = dir.File("plain.txt");
  zt::testing::WriteFileBytes(regular, "not a directory");
  // The swap directory is the regular file itself...
  auto file = SwapFile::Create(regular, "x.swp", 1 << 20);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kFailedPrecondition) << file.status();
  EXPECT_TRUE(Contains(file.status(), regular)) << file.status();
  EXPECT_TRUE(Contains(file.status(), "not a directory")) << file.status();
  // ...or lies beneath it.
  auto below = SwapFile::Create(regular + "/sub", "x.swp", 1 << 20);
  ASSERT_FALSE(below.ok());
  EXPECT_EQ(below.status().code(), absl::StatusCode::kFailedPrecondition) << below.status();
  EXPECT_TRUE(Contains(below.status(), regular + "/sub")) << below.status();
  EXPECT_EQ(zt::testing::ReadFileBytes(regular), "not a directory");
}

TEST(SwapFile, HugeRequestSaysWhatItNeedsAndWhatIsFree) {
  ScratchDir dir("zt_swap");
  const uint64_t pib = uint64_t{1} << 50;
  auto file = SwapFile::Create(dir.path(), "huge.swp", pib);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kResourceExhausted) << file.status();
  EXPECT_TRUE(Contains(file.status(), dir.File("huge.swp"))) << file.status();
  EXPECT_TRUE(Contains(file.status(), "needs 1 PiB (1125899906842624 bytes)")) << file.status();
  EXPECT_TRUE(Contains(file.status(), " free")) << file.status();
  EXPECT_TRUE(dir.List().empty()) << "nothing may be created when there is no room";
}

TEST(SwapFile, BadNamesAreInvalid) {
  ScratchDir dir("zt_swap");
  for (const char* name : {"", "a/b", ".", ".."}) {
    auto file = SwapFile::Create(dir.path(), name, 4096);
    ASSERT_FALSE(file.ok()) << name;
    EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << file.status();
  }
  auto no_dir = SwapFile::Create("", "x", 4096);
  ASSERT_FALSE(no_dir.ok());
  EXPECT_EQ(no_dir.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SwapFile, ExistingNameIsLeftAlone) {
  ScratchDir dir("zt_swap");
  zt::testing::WriteFileBytes(dir.File("taken.swp"), "someone else's");
  auto file = SwapFile::Create(dir.path(), "taken.swp", 4096);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kAlreadyExists) << file.status();
  EXPECT_TRUE(Contains(file.status(), dir.File("taken.swp"))) << file.status();
  EXPECT_EQ(zt::testing::ReadFileBytes(dir.File("taken.swp")), "someone else's");
}

TEST(SwapFile, ZeroBytesIsAnEmptyFile) {
  ScratchDir dir("zt_swap");
  auto file = SwapFile::Create(dir.path(), "empty.swp", 0);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->size(), 0u);
  EXPECT_TRUE(dir.List().empty());
}

// A killed process leaves nothing behind: the name is gone while the file is
// in use, and the space comes back with the descriptor.
TEST(SwapFile, VanishesWithAKilledProcess) {
  ScratchDir dir("zt_swap");
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(ready[0]);
    auto file = SwapFile::Create(dir.path(), "held.swp", 8 << 20);
    char c = file.ok() ? 'y' : 'n';
    if (::write(ready[1], &c, 1) != 1) ::_exit(2);
    ::pause();  // killed here, holding the file
    ::_exit(0);
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  EXPECT_EQ(c, 'y');
  EXPECT_TRUE(dir.List().empty()) << "the name must be gone while the child holds the file";
  ::kill(pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_TRUE(dir.List().empty());
}

// As root the permission bits are not consulted, so the check is made by a
// child that gives up root (a plain user just meets the read-only mode).
TEST(SwapFile, UnwritableDirectoryIsPermissionDenied) {
  ScratchDir dir("zt_swap");
  const std::string locked = dir.File("locked");
  ASSERT_EQ(::mkdir(locked.c_str(), 0555), 0);
  ASSERT_EQ(::chmod(locked.c_str(), 0555), 0);      // whatever the umask did
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);  // the child must reach it
  ChildResult child = RunInChild([&](int report) {
    if (::geteuid() == 0) {
      const uid_t nobody = 65534;
      if (::setgroups(0, nullptr) != 0 || ::setresgid(nobody, nobody, nobody) != 0 ||
          ::setresuid(nobody, nobody, nobody) != 0) {
        Report(report, absl::StrCat("cannot drop root: ", std::strerror(errno)));
        return kSkip;
      }
    }
    auto file = SwapFile::Create(locked, "x.swp", 1 << 20);
    if (file.ok()) return 1;
    Report(report, absl::StrCat(absl::StatusCodeToString(file.status().code()), ": ", file.status().message()));
    return 0;
  });
  if (child.exit_code == kSkip) GTEST_SKIP() << child.output;
  ASSERT_EQ(child.exit_code, 0) << "Create succeeded in a read-only directory";
  EXPECT_TRUE(absl::StartsWith(child.output, "PERMISSION_DENIED")) << child.output;
  EXPECT_TRUE(absl::StrContains(child.output, locked)) << child.output;
  EXPECT_TRUE(absl::StrContains(child.output, "Permission denied")) << child.output;
}

// The mount cases: a child in its own mount namespace (nothing leaks, even if
// it dies) mounts a 1 MiB tmpfs. Skipped where this process may not mount.
ChildResult InTmpfs(const std::string& mount_point, const char* options, unsigned long flags,
                    const std::function<int(int report)>& body) {
  return RunInChild([&](int report) {
    if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      Report(report, absl::StrCat("no private mount namespace: ", std::strerror(errno)));
      return kSkip;
    }
    if (::mount("tmpfs", mount_point.c_str(), "tmpfs", flags, options) != 0) {
      Report(report, absl::StrCat("mount -t tmpfs not permitted: ", std::strerror(errno)));
      return kSkip;
    }
    return body(report);
  });
}

TEST(SwapFile, FullSmallFilesystemSaysNeedsAndFree) {
  ScratchDir dir("zt_swap");
  const std::string mnt = dir.File("mnt");
  ASSERT_EQ(::mkdir(mnt.c_str(), 0755), 0);
  ChildResult child = InTmpfs(mnt, "size=1m", 0, [&](int report) {
    // Fill it: a plain file grown until the filesystem says ENOSPC.
    int fd = ::open((mnt + "/filler").c_str(), O_WRONLY | O_CREAT, 0644);
    if (fd < 0) return 2;
    std::vector<char> chunk(64 << 10, 'x');
    while (::write(fd, chunk.data(), chunk.size()) > 0) {
    }
    ::close(fd);
    auto file = SwapFile::Create(mnt, "opt.swp", 4 << 20);
    if (file.ok()) return 1;
    Report(report, absl::StrCat(absl::StatusCodeToString(file.status().code()), ": ", file.status().message()));
    return 0;
  });
  if (child.exit_code == kSkip) GTEST_SKIP() << child.output;
  ASSERT_EQ(child.exit_code, 0) << "Create of 4 MiB succeeded on a full 1 MiB tmpfs: " << child.output;
  EXPECT_TRUE(absl::StartsWith(child.output, "RESOURCE_EXHAUSTED")) << child.output;
  EXPECT_TRUE(absl::StrContains(child.output, mnt + "/opt.swp")) << child.output;
  EXPECT_TRUE(absl::StrContains(child.output, "needs 4 MiB (4194304 bytes)")) << child.output;
  EXPECT_TRUE(absl::StrContains(child.output, "0 B (0 bytes) free")) << child.output;
}

TEST(SwapFile, ReadOnlyFilesystemIsPermissionDenied) {
  ScratchDir dir("zt_swap");
  const std::string mnt = dir.File("mnt");
  ASSERT_EQ(::mkdir(mnt.c_str(), 0755), 0);
  ChildResult child = InTmpfs(mnt, "size=1m", MS_RDONLY, [&](int report) {
    auto file = SwapFile::Create(mnt, "opt.swp", 64 << 10);
    if (file.ok()) return 1;
    Report(report, absl::StrCat(absl::StatusCodeToString(file.status().code()), ": ", file.status().message()));
    return 0;
  });
  if (child.exit_code == kSkip) GTEST_SKIP() << child.output;
  ASSERT_EQ(child.exit_code, 0) << "Create succeeded on a read-only filesystem";
  EXPECT_TRUE(absl::StartsWith(child.output, "PERMISSION_DENIED")) << child.output;
  EXPECT_TRUE(absl::StrContains(child.output, "Read-only file system")) << child.output;
  EXPECT_TRUE(absl::StrContains(child.output, mnt)) << child.output;
}

TEST(SwapFile, FreeBytesOfAMissingDirectoryIsAnError) {
  ScratchDir dir("zt_swap");
  auto free_bytes = FreeBytes(dir.path());
  ASSERT_TRUE(free_bytes.ok()) << free_bytes.status();
  EXPECT_GT(*free_bytes, 0u);
  auto missing = FreeBytes(dir.File("missing"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Contains(missing.status(), dir.File("missing"))) << missing.status();
}

// ------------------------------------------------ errno mappings (internal)

TEST(SwapFileErrors, OpenErrnoMapping) {
  const std::string dir = "/data/nvme";
  const std::string path = dir + "/opt.swp";
  absl::Status no_direct = internal::OpenError(EINVAL, dir, path);
  EXPECT_EQ(no_direct.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(no_direct, "does not support O_DIRECT")) << no_direct;
  EXPECT_TRUE(Contains(no_direct, "tmpfs before Linux 6.6")) << no_direct;
  EXPECT_TRUE(Contains(no_direct, dir)) << no_direct;
  for (int err : {EACCES, EPERM, EROFS}) {
    absl::Status s = internal::OpenError(err, dir, path);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
    EXPECT_TRUE(Contains(s, std::strerror(err))) << s;
    EXPECT_TRUE(Contains(s, path)) << s;
  }
  EXPECT_EQ(internal::OpenError(EEXIST, dir, path).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(internal::OpenError(ENOSPC, dir, path).code(), absl::StatusCode::kResourceExhausted);
  absl::Status other = internal::OpenError(EMFILE, dir, path);
  EXPECT_FALSE(other.ok());
  EXPECT_TRUE(Contains(other, path)) << other;
}

int FallocateUnsupported(int, int, off_t, off_t) {
  errno = EOPNOTSUPP;
  return -1;
}
int FallocateNoSpace(int, int, off_t, off_t) {
  errno = ENOSPC;
  return -1;
}
int FallocateTooBig(int, int, off_t, off_t) {
  errno = EFBIG;
  return -1;
}
int FallocateIoError(int, int, off_t, off_t) {
  errno = EIO;
  return -1;
}
int g_interrupted_calls = 0;
int FallocateInterruptedOnce(int fd, int mode, off_t offset, off_t len) {
  if (g_interrupted_calls++ == 0) {
    errno = EINTR;
    return -1;
  }
  return ::fallocate(fd, mode, offset, len);
}

TEST(SwapFileErrors, ReserveFallsBackToFtruncateSilently) {
  ScratchDir dir("zt_swap");
  const std::string path = dir.File("plain");
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT, 0600));
  ASSERT_TRUE(fd.valid());
  absl::Status s = internal::Reserve(fd.get(), 3 << 20, dir.path(), path, FallocateUnsupported);
  ASSERT_TRUE(s.ok()) << s;
  struct stat st;
  ASSERT_EQ(::fstat(fd.get(), &st), 0);
  EXPECT_EQ(st.st_size, 3 << 20);
}

TEST(SwapFileErrors, ReserveOutOfSpaceSaysNeedsAndFree) {
  ScratchDir dir("zt_swap");
  const std::string path = dir.File("plain");
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT, 0600));
  ASSERT_TRUE(fd.valid());
  for (auto fn : {FallocateNoSpace, FallocateTooBig}) {
    absl::Status s = internal::Reserve(fd.get(), 2 << 20, dir.path(), path, fn);
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
    EXPECT_TRUE(Contains(s, "needs 2 MiB (2097152 bytes)")) << s;
    EXPECT_TRUE(Contains(s, " free (fallocate: ")) << s;
    EXPECT_TRUE(Contains(s, path)) << s;
  }
  absl::Status too_big = internal::Reserve(fd.get(), 2 << 20, dir.path(), path, FallocateTooBig);
  EXPECT_TRUE(Contains(too_big, "File too large")) << too_big;
  absl::Status io = internal::Reserve(fd.get(), 2 << 20, dir.path(), path, FallocateIoError);
  EXPECT_FALSE(io.ok());
  EXPECT_NE(io.code(), absl::StatusCode::kResourceExhausted) << io;
  EXPECT_TRUE(Contains(io, "Input/output error")) << io;
  g_interrupted_calls = 0;
  EXPECT_TRUE(internal::Reserve(fd.get(), 1 << 20, dir.path(), path, FallocateInterruptedOnce).ok());
  EXPECT_EQ(g_interrupted_calls, 2);
}

TEST(SwapFileErrors, NoRoomMessage) {
  absl::Status s = internal::NoRoomError("/d/f.swp", uint64_t{3} << 30, int64_t{512} << 20, "");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(Contains(s, "'/d/f.swp': needs 3 GiB (3221225472 bytes), 512 MiB (536870912 bytes) free;")) << s;
  absl::Status unknown = internal::NoRoomError("/d/f.swp", 4096, -1, "fallocate: No space left on device");
  EXPECT_TRUE(Contains(unknown, "an unknown amount free (fallocate: No space left on device)")) << unknown;
}

}  // namespace
}  // namespace zt::offload
