// CSV monitor files byte for byte, appending across runs, directory errors,
// and MonitorSet's fan-out and error naming.
#include "monitor/csv_monitor.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <string>

#include "gtest/gtest.h"
#include "monitor/monitor.h"
#include "monitor_test_util.h"

namespace zt::monitor {
namespace {

using testing::ReadAll;
using testing::ScratchDir;
using testing::WriteAll;

TEST(CsvMonitorTest, FileNamesAndValues) {
  EXPECT_EQ(CsvMonitor::FileNameForTag("Train/Samples/train_loss"), "Train_Samples_train_loss.csv");
  EXPECT_EQ(CsvMonitor::FileNameForTag("my tag"), "my_tag.csv");
  // Python's repr(float), as DeepSpeed's rows have it.
  const struct {
    double value;
    const char* want;
  } cases[] = {{2.31, "2.31"},
               {3e-4, "0.0003"},
               {1e-4, "0.0001"},
               {1.5e-5, "1.5e-05"},
               {65536, "65536.0"},
               {0, "0.0"},
               {-1.5, "-1.5"},
               {123.456, "123.456"},
               {0.1 + 0.2, "0.30000000000000004"},  // exact, not rounded
               {1e15, "1000000000000000.0"},
               {1e16, "1e+16"},
               {-2.5e22, "-2.5e+22"},
               {1e-100, "1e-100"},
               {std::nan(""), "nan"},
               {-std::numeric_limits<double>::infinity(), "-inf"}};
  for (const auto& c : cases) EXPECT_EQ(CsvMonitor::FormatValue(c.value), c.want) << c.want;
}

TEST(CsvMonitorTest, ContentsExact) {
  ScratchDir dir;
  auto csv = CsvMonitor::Create({dir.path() + "/out", "job"});
  ASSERT_TRUE(csv.ok()) << csv.status();
  EXPECT_EQ((*csv)->dir(), dir.path() + "/out/job");
  ASSERT_TRUE((*csv)->Write({{tags::kTrainLoss, 2.31, 10}, {tags::kLr, 3e-4, 10}}).ok());
  ASSERT_TRUE((*csv)->Write({{tags::kTrainLoss, 2.125, 20}, {"plain", -1.5, 20}}).ok());
  ASSERT_TRUE((*csv)->Flush().ok());
  const std::string d = dir.path() + "/out/job/";
  EXPECT_EQ(ReadAll(d + "Train_Samples_train_loss.csv"), "step,train_loss\n10,2.31\n20,2.125\n");
  EXPECT_EQ(ReadAll(d + "Train_Samples_lr.csv"), "step,lr\n10,0.0003\n");
  EXPECT_EQ(ReadAll(d + "plain.csv"), "step,plain\n20,-1.5\n");

  // A second run appends to the same files, without a second header.
  csv->reset();
  auto again = CsvMonitor::Create({dir.path() + "/out", "job"});
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE((*again)->Write({{tags::kTrainLoss, 1.75, 30}}).ok());
  again->reset();  // destruction flushes
  EXPECT_EQ(ReadAll(d + "Train_Samples_train_loss.csv"), "step,train_loss\n10,2.31\n20,2.125\n30,1.75\n");
}

TEST(CsvMonitorTest, EmptyOutputPathIsTheCurrentDirectory) {
  ScratchDir dir;
  char old_cwd[4096];
  ASSERT_NE(::getcwd(old_cwd, sizeof(old_cwd)), nullptr);
  ASSERT_EQ(::chdir(dir.path().c_str()), 0);
  auto csv = CsvMonitor::Create({"", "run1"});
  const bool ok = csv.ok() && (*csv)->Write({{"a", 1, 1}}).ok() && (*csv)->Flush().ok();
  ASSERT_EQ(::chdir(old_cwd), 0);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ReadAll(dir.path() + "/run1/a.csv"), "step,a\n1,1.0\n");
}

TEST(CsvMonitorTest, UncreatableDirectoryNamesPathAndKey) {
  ScratchDir dir;
  WriteAll(dir.File("not_a_dir"), "x");
  auto csv = CsvMonitor::Create({dir.File("not_a_dir") + "/sub", "job"});
  ASSERT_FALSE(csv.ok());
  const std::string msg(csv.status().message());
  EXPECT_NE(msg.find("cannot create " + dir.File("not_a_dir") + "/sub/job"), std::string::npos) << msg;
  EXPECT_NE(msg.find("set csv_monitor.output_path to a writable directory"), std::string::npos) << msg;

  if (::geteuid() != 0) {  // root ignores permissions
    ASSERT_EQ(::mkdir(dir.File("ro").c_str(), 0555), 0);
    auto ro = CsvMonitor::Create({dir.File("ro"), "job"});
    ASSERT_FALSE(ro.ok());
    EXPECT_NE(ro.status().message().find("Permission denied"), std::string::npos) << ro.status();
    EXPECT_NE(ro.status().message().find(dir.File("ro") + "/job"), std::string::npos) << ro.status();
  }
}

// A monitor that records calls and fails on demand.
class FakeMonitor : public Monitor {
 public:
  FakeMonitor(std::string name, bool fail, int* writes) : name_(std::move(name)), fail_(fail), writes_(writes) {}
  std::string name() const override { return name_; }
  absl::Status Write(const std::vector<Event>& events) override {
    *writes_ += static_cast<int>(events.size());
    return fail_ ? absl::UnavailableError("disk gone") : absl::OkStatus();
  }
  absl::Status Flush() override { return fail_ ? absl::DataLossError("flush failed") : absl::OkStatus(); }

 private:
  std::string name_;
  bool fail_;
  int* writes_;
};

TEST(MonitorSetTest, FansOutAndFirstErrorWins) {
  int a = 0, b = 0, c = 0;
  MonitorSet set;
  EXPECT_TRUE(set.empty());
  EXPECT_TRUE(set.Write({{"x", 1, 1}}).ok());
  set.Add(std::make_unique<FakeMonitor>("ok_one", false, &a));
  set.Add(std::make_unique<FakeMonitor>("broken", true, &b));
  set.Add(std::make_unique<FakeMonitor>("also_broken", true, &c));
  set.Add(nullptr);  // ignored
  EXPECT_EQ(set.size(), 3u);
  absl::Status st = set.Write({{"x", 1, 1}, {"y", 2, 1}});
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(st.message(), "broken: disk gone");
  EXPECT_EQ(a, 2);
  EXPECT_EQ(b, 2);
  EXPECT_EQ(c, 2);  // still called after an earlier failure
  EXPECT_EQ(set.Flush().message(), "broken: flush failed");
}

}  // namespace
}  // namespace zt::monitor
