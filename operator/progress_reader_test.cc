// Tests reading a job's progress from its pods: the coordinator's /status
// and the master's /metrics over HTTP from the pods' IPs (here loopback
// servers on ephemeral ports), the previous scrape kept per job, and every
// way a reading can be missing without an error.

#include "operator/progress_reader.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>

#include "operator/testing/coordinator_status_examples.h"
#include "services/net/http_server.h"

namespace gaptrain {
namespace {

using nlohmann::json;

std::string Metrics(double version, double gap_sum, double gap_count) {
  return "gaptrain_master_model_version " + std::to_string(version) +
         "\ngaptrain_master_gap_sum " + std::to_string(gap_sum) +
         "\ngaptrain_master_gap_count " + std::to_string(gap_count) +
         "\ngaptrain_master_staleness_sum 10\ngaptrain_master_staleness_count 5\n";
}

json Pod(const std::string& name, const std::string& owner_uid, const std::string& phase,
         const std::string& ip) {
  json pod = {{"metadata",
               {{"name", name},
                {"uid", name + "-uid"},
                {"ownerReferences",
                 {{{"apiVersion", "gaptrain.io/v1alpha1"},
                   {"kind", "TrainingJob"},
                   {"name", "mnist"},
                   {"uid", owner_uid},
                   {"controller", true}}}}}},
              {"status", {{"phase", phase}}}};
  if (!ip.empty()) pod["status"]["podIP"] = ip;
  return pod;
}

class ProgressReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(HttpServer::Start("127.0.0.1", 0, &coordinator_).ok());
    ASSERT_TRUE(HttpServer::Start("127.0.0.1", 0, &master_).ok());
    coordinator_->Handle("/status", [this](const HttpRequest& request) {
      status_authorization_ = request.authorization;
      HttpResponse r;
      r.body = status_body_;
      return r;
    });
    master_->Handle("/metrics", [this](const HttpRequest&) {
      HttpResponse r;
      r.body = metrics_body_;
      return r;
    });
    ProgressReader::Options options;
    options.coordinator_port = coordinator_->port();
    options.master_port = master_->port();
    options.timeout_seconds = 1;
    reader_ = std::make_unique<ProgressReader>(options);
  }

  trainingjob::ObservedJob Observe(const std::string& job_uid = "job-uid",
                                   const std::string& phase = "Running") {
    trainingjob::ObservedJob o;
    o.job = {{"metadata", {{"name", "mnist"}, {"namespace", "default"}, {"uid", job_uid}}}};
    o.pods = {Pod("mnist-coordinator", job_uid, phase, "127.0.0.1"),
              Pod("mnist-master", job_uid, phase, "127.0.0.1")};
    return o;
  }

  std::unique_ptr<HttpServer> coordinator_, master_;
  // The coordinator's own document (services/coordinator/status_examples.cc).
  std::string status_body_ = coordinator_status_examples::kRunning;
  std::string metrics_body_ = Metrics(900, 300, 200);
  std::unique_ptr<ProgressReader> reader_;
  std::string status_authorization_;  // what the last GET /status carried
};

TEST_F(ProgressReaderTest, ReadsBothAndMeasuresAgainstThePreviousScrape) {
  trainingjob::ObservedJob first = Observe();
  std::vector<std::string> problems;
  reader_->Read("default/mnist", &first, &problems);
  EXPECT_TRUE(problems.empty()) << problems[0];
  ASSERT_TRUE(first.coordinator.has_value());
  EXPECT_EQ(first.coordinator->phase, "Running");
  EXPECT_DOUBLE_EQ(first.coordinator->EpochsDone(), 2.25);
  EXPECT_EQ(first.coordinator->live_trainers, 4u);
  ASSERT_TRUE(first.master.has_value());
  EXPECT_EQ(first.master->model_version, 900u);
  EXPECT_DOUBLE_EQ(*first.master->mean_gap, 1.5);  // everything since the master started
  EXPECT_FALSE(first.master->updates_per_second.has_value());
  // The totals as read, for the autoscaler's window.
  ASSERT_TRUE(first.master_scrape.has_value());
  EXPECT_EQ(first.master_scrape->model_version, 900);
  EXPECT_EQ(first.master_scrape->gap_sum, 300);
  EXPECT_EQ(first.master_scrape->gap_count, 200);

  // The next reading measures the pushes since the first one.
  metrics_body_ = Metrics(1000, 400, 250);
  trainingjob::ObservedJob second = Observe();
  reader_->Read("default/mnist", &second, &problems);
  ASSERT_TRUE(second.master.has_value());
  EXPECT_DOUBLE_EQ(*second.master->mean_gap, 2.0);  // 100 / 50

  // /status is asked with the job's status token when it has one.
  EXPECT_EQ(status_authorization_, "");
  trainingjob::ObservedJob locked = Observe();
  locked.job["metadata"]["annotations"] = {{"gaptrain.io/status-token", "read-me"}};
  reader_->Read("default/mnist", &locked, &problems);
  EXPECT_EQ(status_authorization_, "Bearer read-me");
  ASSERT_TRUE(locked.coordinator.has_value());

  // The same name, another job: starts afresh.
  trainingjob::ObservedJob other = Observe("another-uid");
  reader_->Read("default/mnist", &other, &problems);
  EXPECT_DOUBLE_EQ(*other.master->mean_gap, 1.6);  // 400 / 250
}

// Several master shards (spec.master.shards): their totals come from the
// coordinator's /status, each shard's weighted by its share of θ, and no
// master is asked.
TEST_F(ProgressReaderTest, SeveralShardsAreReadFromTheCoordinatorsStatus) {
  json status = json::parse(coordinator_status_examples::kRunning);
  status["masterVersion"] = 500;
  status["masters"] = json::array(
      {{{"shard", 0}, {"parameters", 300}, {"version", 510}, {"updates", 510},
        {"gapSum", 600.0}, {"gapCount", 300}, {"stalenessSum", 900.0}, {"stalenessCount", 300}},
       {{"shard", 1}, {"parameters", 100}, {"version", 500}, {"updates", 500},
        {"gapSum", 1200.0}, {"gapCount", 300}, {"stalenessSum", 900.0},
        {"stalenessCount", 300}}});
  status_body_ = status.dump();
  metrics_body_ = "not metrics";  // would not parse: must not be read
  trainingjob::ObservedJob o = Observe();
  o.spec.master.shards = 2;
  std::vector<std::string> problems;
  reader_->Read("default/mnist", &o, &problems);
  EXPECT_TRUE(problems.empty()) << problems[0];
  ASSERT_TRUE(o.coordinator.has_value());
  ASSERT_EQ(o.coordinator->masters.size(), 2u);
  EXPECT_EQ(o.coordinator->masters[1].version, 500u);
  ASSERT_TRUE(o.master_scrape.has_value());
  EXPECT_EQ(o.master_scrape->model_version, 500) << "the least shard's";
  // Shard 0: mean Gap 2 over 3/4 of θ; shard 1: 4 over 1/4: 2.5 per parameter,
  // over one master's 300 pushes.
  EXPECT_DOUBLE_EQ(o.master_scrape->gap_count, 300);
  ASSERT_TRUE(o.master.has_value());
  EXPECT_DOUBLE_EQ(*o.master->mean_gap, 2.5);
  EXPECT_DOUBLE_EQ(*o.master->mean_staleness, 3.0);

  // A coordinator that lists no shard yet: the reason, no totals.
  status.erase("masters");
  status_body_ = status.dump();
  trainingjob::ObservedJob early = Observe("early-uid");
  early.spec.master.shards = 2;
  problems.clear();
  reader_->Read("default/early", &early, &problems);
  EXPECT_FALSE(early.master_scrape.has_value());
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0], "master totals: the coordinator's status lists no master shard");
}

TEST_F(ProgressReaderTest, MissingReadingsAreAbsentWithTheReason) {
  std::vector<std::string> problems;
  trainingjob::ObservedJob pending = Observe("job-uid", "Pending");
  reader_->Read("default/mnist", &pending, &problems);
  EXPECT_FALSE(pending.coordinator.has_value());
  EXPECT_FALSE(pending.master.has_value());
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0], "coordinator status: pod mnist-coordinator is not running");

  // Another job's pods of the same names are not this job's.
  problems.clear();
  trainingjob::ObservedJob foreign = Observe();
  for (json& pod : foreign.pods) pod["metadata"]["ownerReferences"][0]["uid"] = "someone-else";
  reader_->Read("default/mnist", &foreign, &problems);
  EXPECT_FALSE(foreign.coordinator.has_value());
  EXPECT_EQ(problems[0], "coordinator status: pod mnist-coordinator does not exist");

  problems.clear();
  status_body_ = "<html>not a status</html>";
  metrics_body_ = "";
  trainingjob::ObservedJob garbled = Observe();
  reader_->Read("default/mnist", &garbled, &problems);
  EXPECT_FALSE(garbled.coordinator.has_value());
  EXPECT_FALSE(garbled.master.has_value());
  EXPECT_FALSE(garbled.master_scrape.has_value());
  EXPECT_EQ(problems.size(), 2u);

  // Nobody listening: unreachable, quickly.
  problems.clear();
  coordinator_->Stop();
  master_->Stop();
  trainingjob::ObservedJob gone = Observe();
  reader_->Read("default/mnist", &gone, &problems);
  EXPECT_FALSE(gone.coordinator.has_value());
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[0].find("http://127.0.0.1:"), std::string::npos) << problems[0];
}

}  // namespace
}  // namespace gaptrain
