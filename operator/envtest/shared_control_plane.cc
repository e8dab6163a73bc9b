#include "operator/envtest/shared_control_plane.h"

#include <gtest/gtest.h>

#include <cctype>
#include <memory>

namespace gaptrain {
namespace envtest {
namespace {

std::unique_ptr<ControlPlane>& Instance() {
  static std::unique_ptr<ControlPlane> instance;
  return instance;
}

Status& StartStatus() {
  static Status status = Status::FailedPrecondition("SharedControlPlane::Start was not called");
  return status;
}

}  // namespace

void SharedControlPlane::Start(const ControlPlane::Options& options) {
  if (Instance() != nullptr) return;
  StartStatus() = ControlPlane::Start(options, &Instance());
}

void SharedControlPlane::Stop() {
  Instance().reset();
  StartStatus() = Status::FailedPrecondition("the shared control plane was stopped");
}

ControlPlane* SharedControlPlane::Get() { return Instance().get(); }

const Status& SharedControlPlane::start_status() { return StartStatus(); }

Status SharedControlPlane::CreateTestNamespace(std::string* ns) {
  if (Get() == nullptr) return start_status();
  *ns = TestObjectName();
  return Get()->CreateNamespace(*ns);
}

std::string TestObjectName() {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = test != nullptr ? test->name() : "no-test";
  for (char& c : name) {
    c = std::isalnum(static_cast<unsigned char>(c))
            ? static_cast<char>(std::tolower(static_cast<unsigned char>(c)))
            : '-';
  }
  if (name.size() > 63) name.resize(63);
  while (!name.empty() && name.back() == '-') name.pop_back();
  return name;
}

}  // namespace envtest
}  // namespace gaptrain
