// SharedControlPlane: the one real control plane of a test binary, as an
// envtest suite shares one (it takes 2-4 s to start; tests use namespaces
// of their own instead of control planes of their own).
//
//   class MyTest : public ::testing::Test {
//    protected:
//     static void SetUpTestSuite() { SharedControlPlane::Start(options); }
//     static void TearDownTestSuite() { SharedControlPlane::Stop(); }
//     void SetUp() override {
//       GAPTRAIN_REQUIRE_SHARED_CONTROL_PLANE();
//       cluster_ = SharedControlPlane::Get();
//     }
//   };
//
// SharedControlPlaneTest<MyTest> is that fixture, with a namespace per test.
//
// What callers may rely on: Start() starts it once per binary (later calls
// keep the first); a test whose SetUp requires it skips when an envtest
// binary is missing (fails when CI=true, services/testing/
// missing_requirement.h) and fails when it did not start for another
// reason, with the reason. Call Start() and Stop() from the main thread
// (the suite's set-up and tear-down run there).

#ifndef GAPTRAIN_OPERATOR_ENVTEST_SHARED_CONTROL_PLANE_H_
#define GAPTRAIN_OPERATOR_ENVTEST_SHARED_CONTROL_PLANE_H_

#include <gtest/gtest.h>

#include <string>

#include "operator/envtest/control_plane.h"
#include "services/base/status.h"
#include "services/testing/missing_requirement.h"
#include "services/testing/test_processes.h"

namespace gaptrain {
namespace envtest {

class SharedControlPlane {
 public:
  static void Start(const ControlPlane::Options& options);
  static void Stop();
  // Null when it is not running.
  static ControlPlane* Get();
  // How Start() went (FAILED_PRECONDITION before it was called).
  static const Status& start_status();

  // Creates a namespace named after the running test (TestObjectName()),
  // so that tests sharing the control plane see only their own objects.
  static Status CreateTestNamespace(std::string* ns);
};

// The running test's name as a DNS label: lower case, at most 63
// characters ("AJobsLife" -> "ajobslife").
std::string TestObjectName();

}  // namespace envtest
}  // namespace gaptrain

#define GAPTRAIN_REQUIRE_SHARED_CONTROL_PLANE()                                            \
  do {                                                                                     \
    const ::gaptrain::Status& started_ = ::gaptrain::envtest::SharedControlPlane::start_status(); \
    if (started_.code() == ::gaptrain::Status::Code::kNotFound) {                          \
      GAPTRAIN_SKIP_OR_FAIL_IN_CI(started_.message());                                     \
    }                                                                                      \
    ASSERT_TRUE(started_.ok()) << started_.ToString();                                     \
  } while (0)

namespace gaptrain {
namespace envtest {

// A fixture on the shared control plane: each test gets cluster_ and a
// namespace of its own, ns_, named after it (CreateTestNamespace). The
// test class names itself, and may hide ControlPlaneOptions() (public) to
// start the control plane with more (CRDs, the controller manager):
//
//   class MyTest : public SharedControlPlaneTest<MyTest> {
//    public:
//     static ControlPlane::Options ControlPlaneOptions();
//   };
//
// What the test class sets up on top goes in SetUpOnCluster(), which runs
// only once cluster_ and ns_ are there.
template <class Fixture>
class SharedControlPlaneTest : public ::testing::Test {
 public:
  // A control plane in TestTempDir("cluster"), with nothing more.
  static ControlPlane::Options ControlPlaneOptions() {
    ControlPlane::Options options;
    options.work_dir = TestTempDir("cluster");
    return options;
  }

 protected:
  static void SetUpTestSuite() { SharedControlPlane::Start(Fixture::ControlPlaneOptions()); }
  static void TearDownTestSuite() { SharedControlPlane::Stop(); }

  void SetUp() override {
    GAPTRAIN_REQUIRE_SHARED_CONTROL_PLANE();
    cluster_ = SharedControlPlane::Get();
    const Status created = SharedControlPlane::CreateTestNamespace(&ns_);
    ASSERT_TRUE(created.ok()) << created.ToString();
    SetUpOnCluster();
  }
  virtual void SetUpOnCluster() {}

  ControlPlane* cluster_ = nullptr;
  std::string ns_;
};

}  // namespace envtest
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_ENVTEST_SHARED_CONTROL_PLANE_H_
