// util/publish_folder.h: the staged folder appears whole under its final
// name, an earlier folder is replaced only once the new one is complete.
#include "util/publish_folder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace zt {
namespace {

namespace fs = std::filesystem;

class PublishFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = (fs::temp_directory_path() / absl::StrCat("zt-publish-", ::getpid(), "-",
                                                      ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                .string();
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string Path(const std::string& name) const { return root_ + "/" + name; }
  void Write(const std::string& folder, const std::string& text) {
    fs::create_directories(folder);
    std::ofstream(folder + "/file") << text;
  }
  static std::string Read(const std::string& folder) {
    std::ifstream in(folder + "/file");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  std::string root_;
};

TEST_F(PublishFolderTest, ANewFolderTakesItsName) {
  Write(Path(".staged"), "new");
  ASSERT_TRUE(PublishFolder(Path(".staged"), Path("tag"), Path("tag.aside")).ok());
  EXPECT_EQ(Read(Path("tag")), "new");
  EXPECT_FALSE(fs::exists(Path(".staged")));
  EXPECT_FALSE(fs::exists(Path("tag.aside")));
}

TEST_F(PublishFolderTest, AnEarlierFolderIsReplacedAndItsCopyRemoved) {
  Write(Path("tag"), "old");
  Write(Path(".staged"), "new");
  ASSERT_TRUE(PublishFolder(Path(".staged"), Path("tag"), Path("tag.aside")).ok());
  EXPECT_EQ(Read(Path("tag")), "new");
  EXPECT_FALSE(fs::exists(Path("tag.aside")));
}

TEST_F(PublishFolderTest, WrittenInPlaceIsOnlySynced) {
  Write(Path("tag"), "in place");
  ASSERT_TRUE(PublishFolder(Path("tag"), Path("tag"), Path("tag.aside")).ok());
  EXPECT_EQ(Read(Path("tag")), "in place");
}

TEST_F(PublishFolderTest, AFailedRenameKeepsTheEarlierFolderAndSaysWhere) {
  Write(Path("tag"), "old");
  // Nothing staged: the second rename fails after the first moved the old
  // folder aside, and the error says where it is.
  const absl::Status st = PublishFolder(Path(".missing"), Path("tag"), Path("tag.aside"));
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(absl::StrContains(st.message(), Path(".missing"))) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), Path("tag.aside"))) << st;
  EXPECT_EQ(Read(Path("tag.aside")), "old");
}

TEST_F(PublishFolderTest, AMissingParentIsNamed) {
  const absl::Status st = SyncDirectory(Path("no/such/dir"));
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(absl::StrContains(st.message(), Path("no/such/dir"))) << st;
}

}  // namespace
}  // namespace zt
