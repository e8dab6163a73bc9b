// The generated CRD on a real kube-apiserver (operator/envtest), where its
// CEL rules run (schema_check cannot evaluate them): for every rule between
// fields, a job that breaks it is refused at create and at `kubectl apply`
// with the parser's or the operator's own message (the same words the
// operator would fail the job with), and jobs on each rule's edge, every
// example and a job with every optional section absent are accepted; and
// `kubectl get tj` prints the progress the operator writes as people read
// it (2.3/4, 98.45%, 2.17, 270) while status.progress keeps the numbers.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "operator/crd/trainingjob_crd.h"
#include "operator/envtest/control_plane.h"
#include "operator/envtest/shared_control_plane.h"
#include "operator/kube/api_error.h"
#include "operator/kube/resource.h"
#include "operator/testing/test_job.h"
#include "operator/trainingjob/desired_children.h"
#include "operator/trainingjob/object_fields.h"
#include "operator/trainingjob/observed_job.h"
#include "operator/trainingjob/operator_config.h"
#include "operator/trainingjob/pod_ledger.h"
#include "operator/trainingjob/reconcile.h"
#include "services/api/training_job.h"
#include "services/testing/missing_requirement.h"
#include "services/testing/status_assertions.h"
#include "services/testing/test_files.h"

namespace gaptrain {
namespace {

using kube_testing::TestJob;
using nlohmann::json;

// What the operator says of `job` (as the API server would return it):
// ParseTrainingJob's error, else BuildDesiredChildren's; "" when neither
// fails.
std::string OperatorVerdict(json job, const std::string& ns) {
  job["metadata"]["namespace"] = ns;
  job["metadata"]["uid"] = "0b4c1d2e-8f00-4a5b-9c6d-7e8f9a0b1c2d";
  const trainingjob::ObservedJob observed = trainingjob::ObserveJob(job);
  if (!observed.parse_status.ok()) return observed.parse_status.message();
  trainingjob::OperatorConfig config;
  config.image = "ghcr.io/gaptrain/gaptrain:0.1.0";
  trainingjob::DesiredChildren children;
  return trainingjob::BuildDesiredChildren(job, observed.spec, config, config.image,
                                           trainingjob::JobCredentials(), &children)
      .message();
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The cells of kubectl's table, by column name, for the row of `name`.
std::map<std::string, std::string> TableRow(const std::string& table, const std::string& name) {
  std::istringstream lines(table);
  std::string header, line;
  std::getline(lines, header);
  // Columns start where the header's words do (kubectl pads cells to them).
  std::vector<size_t> starts;
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] != ' ' && (i == 0 || header[i - 1] == ' ')) starts.push_back(i);
  }
  std::map<std::string, std::string> row;
  while (std::getline(lines, line)) {
    if (line.rfind(name + " ", 0) != 0) continue;
    for (size_t c = 0; c < starts.size(); ++c) {
      const size_t end = c + 1 < starts.size() ? starts[c + 1] : std::string::npos;
      auto cell = [&](const std::string& s) {
        if (starts[c] >= s.size()) return std::string();
        std::string t = s.substr(starts[c], end == std::string::npos ? end : end - starts[c]);
        t.erase(t.find_last_not_of(' ') + 1);
        return t;
      };
      row[cell(header)] = cell(line);
    }
  }
  return row;
}

// A namespace per test: names never collide between tests.
class TrainingJobCrdApiTest : public envtest::SharedControlPlaneTest<TrainingJobCrdApiTest> {
 public:
  static envtest::ControlPlane::Options ControlPlaneOptions() {
    envtest::ControlPlane::Options options = SharedControlPlaneTest::ControlPlaneOptions();
    options.crd_files = {kTrainingJobCrdPath};
    return options;
  }

 protected:
  Status Create(const json& job, json* out = nullptr, kube::ApiError* error = nullptr) {
    return cluster_->admin()->Create(kube::kTrainingJobs, ns_, job, out, error);
  }

  // `kubectl apply -f` of `job` written to a file.
  Status KubectlApply(const json& job, std::string* output, bool dry_run = false) {
    const std::string file = TestDir("apply") + "/" + job["metadata"]["name"].get<std::string>() +
                             ".json";
    WriteRaw(file, job.dump(2));
    std::vector<std::string> args = {"apply", "-n", ns_, "-f", file};
    if (dry_run) args.push_back("--dry-run=server");
    return cluster_->Kubectl(args, output);
  }
};


// A job that breaks one rule: the API refuses it with the rule's message,
// which is what the operator says of the same job.
struct Broken {
  const char* what;
  std::string name;
  const char* spec;
  JobRule rule;
};

std::vector<Broken> BrokenJobs() {
  return {
      {"a name of 52 characters", std::string(52, 'a'),
       "{data: {path: /data}, training: {epochs: 1}}", kRuleClusterJobName},
      {"a name with a leading digit", "1mnist", "{data: {path: /data}, training: {epochs: 1}}",
       kRuleClusterJobName},
      {"a relative data path under a claim", "relative-path",
       "{data: {path: data/mnist, claimName: datasets}, training: {epochs: 1}}",
       kRuleClaimPathAbsolute},
      {"no data path", "no-path", "{data: {format: mnist-idx}, training: {epochs: 1}}",
       kRuleDataPath},
      {"custom data without its size", "custom-no-size",
       "{data: {format: custom}, model: {fromTrainer: true}, training: {epochs: 1}}",
       kRuleCustomDataSize},
      {"a size for files that have one", "idx-size",
       "{data: {path: /data, trainSamples: 100}, training: {epochs: 1}}", kRuleCustomDataSize},
      {"shards without their count", "shards-no-count",
       "{data: {format: shards, trainSamples: 100}, model: {fromTrainer: true}, "
       "training: {epochs: 1}}",
       kRuleShardCount},
      {"a shard count for files", "idx-shards",
       "{data: {path: /data, shards: 4}, training: {epochs: 1}}", kRuleShardCount},
      {"custom data with a built-in model", "custom-builtin",
       "{data: {format: custom, trainSamples: 100}, training: {epochs: 1}}",
       kRuleCustomDataFromTrainer},
      {"both epochs and maxUpdates", "both-lengths",
       "{data: {path: /data}, training: {epochs: 1, maxUpdates: 100}}", kRuleOneLength},
      {"neither epochs nor maxUpdates", "no-length",
       "{data: {path: /data}, training: {batchSize: 64}}", kRuleOneLength},
      {"nesterov without momentum", "nesterov-no-momentum",
       "{data: {path: /data}, training: {epochs: 1, optimizer: {nesterov: true, momentum: 0}}}",
       kRuleNesterovNeedsMomentum},
      {"decreasing decay fractions", "decreasing-fractions",
       "{data: {path: /data}, training: {epochs: 1, optimizer: {decay: {atFractions: [0.75, "
       "0.5]}}}}",
       kRuleDecayFractionsIncrease},
      {"a repeated decay fraction", "repeated-fraction",
       "{data: {path: /data}, training: {epochs: 1, optimizer: {decay: {atFractions: [0.5, 0.5, "
       "0.75]}}}}",
       kRuleDecayFractionsIncrease},
      {"nesterov with DANA", "nesterov-dana",
       "{data: {path: /data}, training: {epochs: 1, optimizer: {nesterov: true}, staleness: "
       "{rule: gap-aware-dana}}}",
       kRuleNoNesterovWithDana},
      {"minReplicas above replicas", "min-above",
       "{data: {path: /data}, training: {epochs: 1}, workers: {replicas: 2, minReplicas: 5}}",
       kRuleMinReplicas},
      // replicas as the API server defaults it (1).
      {"minReplicas above the default replicas", "min-above-default",
       "{data: {path: /data}, training: {epochs: 1}, workers: {minReplicas: 2}}",
       kRuleMinReplicas},
      {"maxReplicas below replicas", "max-below",
       "{data: {path: /data}, training: {epochs: 1}, workers: {replicas: 4, maxReplicas: 2}}",
       kRuleMaxReplicas},
      {"autoscaling without a range", "autoscale-no-range",
       "{data: {path: /data}, training: {epochs: 1}, workers: {replicas: 4, autoscale: {enabled: "
       "true}}}",
       kRuleAutoscaleRange},
      {"autoscaling a rule without a Gap", "autoscale-no-gap",
       "{data: {path: /data}, training: {epochs: 1, staleness: {rule: dana-zero}}, workers: "
       "{replicas: 4, maxReplicas: 8, autoscale: {enabled: true}}}",
       kRuleAutoscaleGap},
      {"a claim for the model without a path", "output-no-path",
       "{data: {path: /data}, training: {epochs: 1}, output: {claimName: models}}",
       kRuleOutputClaimAndPath},
      {"a declared model that is also a TorchScript file", "declared-and-scripted",
       "{data: {path: /data}, training: {epochs: 1}, model: {fromTrainer: true, torchscript: "
       "m.pt}}",
       kRuleFromTrainerWithoutTorchscript},
      {"a model path without a claim", "output-no-claim",
       "{data: {path: /data}, training: {epochs: 1}, output: {path: model.pt}}",
       kRuleOutputClaimAndPath},
      {"a target without a bound", "target-no-bound",
       "{data: {path: /data}, training: {epochs: 1, target: {metric: perplexity}}}",
       kRuleTargetBound},
      {"a target with both bounds", "target-two-bounds",
       "{data: {path: /data}, training: {epochs: 1, target: {metric: f1, atLeast: 0.8, "
       "atMost: 0.9}}}",
       kRuleTargetBound},
      {"a bound without a metric", "bound-no-metric",
       "{data: {path: /data}, training: {epochs: 1, target: {atMost: 20}}}", kRuleTargetBound},
      {"a target and a targetAccuracy", "two-targets",
       "{data: {path: /data}, training: {epochs: 1, targetAccuracy: 0.9, target: {metric: f1, "
       "atLeast: 0.8}}}",
       kRuleOneTarget},
      {"as many backup workers as workers", "all-backups",
       "{data: {path: /data}, training: {epochs: 1, mode: sync, sync: {backupWorkers: 2}}, "
       "workers: {replicas: 2}}",
       kRuleBackupWorkers},
  };
}

TEST_F(TrainingJobCrdApiTest, EveryRuleRefusesWithTheOperatorsMessage) {
  std::set<std::string> covered;
  for (const Broken& b : BrokenJobs()) {
    SCOPED_TRACE(b.what);
    const json job = TestJob(b.name, b.spec);
    const std::string text = b.rule.Text();
    covered.insert(text);

    // What the operator would fail the job with...
    const std::string verdict = OperatorVerdict(job, ns_);
    EXPECT_NE(verdict.find(text), std::string::npos) << verdict;

    // ...the API server says first, naming nothing else.
    kube::ApiError error;
    const Status created = Create(job, nullptr, &error);
    ASSERT_FALSE(created.ok()) << "the API server accepted it";
    EXPECT_TRUE(kube::IsInvalid(created)) << created.ToString();
    EXPECT_EQ(error.http_status, 422) << created.ToString();
    EXPECT_NE(error.message.find(text), std::string::npos) << error.message;
    EXPECT_EQ(Count(error.message, "Invalid value"), 1u) << error.message;
    // It names the field the rule is about (fieldPath), not the node the
    // rule sits on.
    EXPECT_NE(error.message.find(std::string(b.rule.path) + ": Invalid value"), std::string::npos)
        << error.message;
    // Where the operator adds the value (the name), the API server does too.
    if (b.rule.path == kRuleClusterJobName.path) {
      EXPECT_NE(error.message.find(verdict), std::string::npos) << error.message;
    }
    std::cout << b.what << ": " << error.message << "\n";
  }
  // One case at least for every rule the CRD states (a transition rule's
  // is an update: AChangeOfMasterShardsIsRefused).
  for (const CrdValidationRule& r : TrainingJobValidationRules()) {
    if (r.rule.find("oldSelf") != std::string::npos) continue;
    EXPECT_EQ(covered.count(r.message), 1u) << "no case breaks: " << r.message;
  }
}

// spec.master.shards is fixed once the job exists; other spec changes
// (the trainers' replicas, as kubectl scale makes) still go through.
TEST_F(TrainingJobCrdApiTest, AChangeOfMasterShardsIsRefused) {
  json job = TestJob("two-shards", "{data: {path: /data}, training: {epochs: 1}, "
                                   "master: {shards: 2}}");
  json created;
  Status s = cluster_->admin()->Create(kube::kTrainingJobs, ns_, job, &created);
  ASSERT_TRUE(s.ok()) << s.ToString();
  json changed = created;
  changed["spec"]["master"]["shards"] = 4;
  s = cluster_->admin()->Update(kube::kTrainingJobs, ns_, changed, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(kRuleShardsFixed.Text()), std::string::npos) << s.ToString();
  json scaled = created;
  scaled["spec"]["workers"]["replicas"] = 3;
  s = cluster_->admin()->Update(kube::kTrainingJobs, ns_, scaled, nullptr);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST_F(TrainingJobCrdApiTest, KubectlApplyRefusesMinReplicasAboveReplicas) {
  const json job = TestJob("min-above", "{data: {path: /data}, training: {epochs: 1}, "
                                    "workers: {replicas: 2, minReplicas: 5}}");
  std::string output;
  const Status applied = KubectlApply(job, &output);
  EXPECT_FALSE(applied.ok()) << output;
  EXPECT_NE(output.find(kRuleMinReplicas.Text()), std::string::npos) << output;
  std::cout << "kubectl apply: " << output << "\n";
  // The parser's message, less the value it adds.
  EXPECT_NE(OperatorVerdict(job, ns_).find(kRuleMinReplicas.Text() + " (2)"), std::string::npos);
  // Nothing was stored.
  const Status got = cluster_->admin()->Get(kube::kTrainingJobs, ns_, "min-above", nullptr);
  EXPECT_TRUE(kube::IsNotFound(got)) << got.ToString();
}

TEST_F(TrainingJobCrdApiTest, JobsOnEachRulesEdgeAreAccepted) {
  const std::pair<std::string, const char*> jobs[] = {
      // Every optional section absent: the rules read the defaults.
      {"minimal", "{data: {path: /data}, training: {epochs: 1}}"},
      {"counted-in-updates", "{data: {path: /data}, training: {maxUpdates: 100}}"},
      {std::string("a") + std::string(50, '9'), "{data: {path: /data}, training: {epochs: 1}}"},
      {"absolute-claim-path",
       "{data: {path: /data/mnist, claimName: datasets}, training: {epochs: 1}}"},
      {"nesterov-momentum",
       "{data: {path: /data}, training: {epochs: 1, optimizer: {nesterov: true, momentum: 0.5}, "
       "staleness: {rule: gap-aware}}}"},
      // DANA with nesterov in sync mode: the rule applies to async only.
      {"sync-dana-nesterov",
       "{data: {path: /data}, training: {epochs: 1, mode: sync, optimizer: {nesterov: true}, "
       "staleness: {rule: dana-zero}}}"},
      {"one-fraction",
       "{data: {path: /data}, training: {epochs: 1, optimizer: {decay: {atFractions: [0.3]}}}}"},
      {"no-fractions",
       "{data: {path: /data}, training: {epochs: 1, optimizer: {decay: {atFractions: []}}}}"},
      {"replicas-bounds",
       "{data: {path: /data}, training: {epochs: 1}, workers: {replicas: 3, minReplicas: 3, "
       "maxReplicas: 3}}"},
      {"elastic", "{data: {path: /data}, training: {epochs: 1}, workers: {replicas: 3, "
                  "minReplicas: 1, maxReplicas: 0}}"},
      {"min-default-replicas",
       "{data: {path: /data}, training: {epochs: 1}, workers: {minReplicas: 1}}"},
      {"most-backups",
       "{data: {path: /data}, training: {epochs: 1, mode: sync, sync: {backupWorkers: 1}}, "
       "workers: {replicas: 2}}"},
      {"output", "{data: {path: /data}, training: {epochs: 1}, "
                 "output: {claimName: models, path: mnist/model-1.pt}}"},
      // Data the trainers' code reads: its size, no path, their model.
      {"custom-data", "{data: {format: custom, trainSamples: 60000}, model: {fromTrainer: true}, "
                      "training: {epochs: 1}, workers: {template: {spec: {containers: "
                      "[{command: [train]}]}}}, evaluator: {template: {spec: {containers: "
                      "[{command: [eval]}]}}}}"},
      {"sharded-data", "{data: {format: shards, shards: 40, trainSamples: 60000}, model: "
                       "{fromTrainer: true}, training: {epochs: 1}, workers: {template: {spec: "
                       "{containers: [{command: [train]}]}}}, evaluator: {template: {spec: "
                       "{containers: [{command: [eval]}]}}}}"},
      // A metric of the user's evaluation: their evaluator runs.
      {"target-at-most", "{data: {path: /data}, training: {epochs: 1, "
                         "target: {metric: perplexity, atMost: 20}}, "
                         "evaluator: {template: {spec: {containers: [{command: [eval]}]}}}}"},
      {"target-and-no-accuracy", "{data: {path: /data}, training: {epochs: 1, "
                                 "targetAccuracy: 0, target: {metric: top5_accuracy, "
                                 "atLeast: 0.95}}, evaluator: {template: {spec: "
                                 "{containers: [{command: [eval]}]}}}}"},
      {"target-loss", "{data: {path: /data}, training: {epochs: 1, "
                      "target: {metric: loss, atMost: 0.2}}}"},
      // backupWorkers is ignored in async mode.
      {"async-backups", "{data: {path: /data}, training: {epochs: 1, sync: {backupWorkers: 5}}}"},
      // θ over the most master shards the operator runs.
      {"sixty-four-shards", "{data: {path: /data}, training: {epochs: 1}, master: {shards: 64}}"},
  };
  for (const auto& [name, spec] : jobs) {
    SCOPED_TRACE(name);
    const json job = TestJob(name, spec);
    EXPECT_EQ(OperatorVerdict(job, ns_), "");
    json stored;
    const Status created = Create(job, &stored);
    EXPECT_TRUE(created.ok()) << created.ToString();
    // What the API server stores (defaults applied) is what the operator reads.
    if (created.ok()) {
      EXPECT_EQ(OperatorVerdict(stored, ns_), "");
    }
  }
}

// `kubectl get tj --field-selector` on the CRD's selectableFields, as the
// API server filters: by mode, rule, replicas and the phase the operator
// writes; a field that is not selectable is refused by name.
TEST_F(TrainingJobCrdApiTest, FieldSelectorsPickJobsByTheirSelectableFields) {
  ASSERT_OK(Create(TestJob("gap", "{data: {path: /data}, training: {epochs: 1, staleness: "
                              "{rule: gap-aware-dana}}, workers: {replicas: 4}}")));
  ASSERT_OK(Create(TestJob("lockstep", "{data: {path: /data, claimName: mnist}, training: {epochs: "
                                   "1, mode: sync}, workers: {replicas: 2, preemptible: true}}")));
  ASSERT_OK(Create(TestJob("plain", "{data: {path: /data}, training: {epochs: 1}, "
                                "model: {builtin: resnet20}}")));
  ASSERT_OK(cluster_->admin()->MergePatch(kube::kTrainingJobs.Subresource("status"), ns_,
                                          "lockstep", {{"status", {{"phase", "Running"}}}},
                                          nullptr));
  auto names = [&](const std::string& selector) {
    std::string output;
    const Status s = cluster_->Kubectl(
        {"get", "tj", "-n", ns_, "--field-selector", selector, "-o", "name"}, &output);
    return s.ok() ? output : s.ToString();
  };
  EXPECT_EQ(names("spec.training.mode=sync"), "trainingjob.gaptrain.io/lockstep\n");
  EXPECT_EQ(names("spec.training.staleness.rule=gap-aware-dana"), "trainingjob.gaptrain.io/gap\n");
  EXPECT_EQ(names("spec.workers.replicas=4"), "trainingjob.gaptrain.io/gap\n");
  EXPECT_EQ(names("spec.workers.preemptible=true"), "trainingjob.gaptrain.io/lockstep\n");
  EXPECT_EQ(names("spec.data.claimName=mnist"), "trainingjob.gaptrain.io/lockstep\n");
  EXPECT_EQ(names("spec.model.builtin=resnet20"), "trainingjob.gaptrain.io/plain\n");
  EXPECT_EQ(names("status.phase=Running"), "trainingjob.gaptrain.io/lockstep\n");
  EXPECT_EQ(names("spec.training.mode!=sync,spec.runPolicy.suspend=false"),
            "trainingjob.gaptrain.io/gap\ntrainingjob.gaptrain.io/plain\n");
  const std::string refused = names("spec.training.batchSize=64");
  EXPECT_NE(refused.find("field label not supported: spec.training.batchSize"), std::string::npos)
      << refused;
}

TEST_F(TrainingJobCrdApiTest, EveryExampleIsAccepted) {
  std::vector<std::string> files = FilesEndingIn("examples", ".yaml");
  for (const char* dir : {"examples/sim", "examples/k8s"}) {
    const std::vector<std::string> more = FilesEndingIn(dir, ".yaml");
    files.insert(files.end(), more.begin(), more.end());
  }
  int jobs = 0;
  for (const std::string& file : files) {
    if (ReadRaw(file).find("kind: TrainingJob") == std::string::npos) continue;
    SCOPED_TRACE(file);
    ++jobs;
    // The server's dry run: admission and validation, CEL included,
    // nothing stored (examples/ and examples/k8s share names).
    std::string output;
    const Status applied =
        cluster_->Kubectl({"apply", "-n", ns_, "--dry-run=server", "-f", file}, &output);
    EXPECT_TRUE(applied.ok()) << output;
  }
  EXPECT_GE(jobs, 12);
}

// The operator's condition for a trainer whose data store is away
// (DataUnavailable) is one the CRD takes on the status subresource, and
// `kubectl get` reads it back; a type the CRD does not list is refused.
TEST_F(TrainingJobCrdApiTest, TheStatusTakesTheDataUnavailableCondition) {
  ASSERT_TRUE(Create(TestJob("away", "{data: {path: /data}, training: {epochs: 1}}")).ok());
  json condition = {{"type", "DataUnavailable"},
                    {"status", "True"},
                    {"reason", "StoreUnreachable"},
                    {"message", "trainer away-trainer-0 (worker 2) cannot reach its data: "
                                "ConnectionRefusedError: [Errno 111] store:9000 refused the "
                                "connection (1 task handed back since 2026-11-23T06:05:00Z)"},
                    {"lastTransitionTime", "2026-11-23T06:05:00Z"},
                    {"lastUpdateTime", "2026-11-23T06:05:00Z"}};
  const auto patch = [&](const json& c) {
    return cluster_->admin()->MergePatch(
        kube::kTrainingJobs.Subresource("status"), ns_, "away",
        {{"status", {{"phase", "Running"}, {"conditions", json::array({c})}}}}, nullptr);
  };
  const Status patched = patch(condition);
  ASSERT_TRUE(patched.ok()) << patched.ToString();
  std::string reason;
  ASSERT_TRUE(cluster_->Kubectl({"get", "tj", "away", "-n", ns_, "-o",
                                 "jsonpath={.status.conditions[?(@.type==\"DataUnavailable\")]"
                                 ".reason}"},
                                &reason)
                  .ok())
      << reason;
  EXPECT_EQ(reason, "StoreUnreachable");
  condition["type"] = "StoreAway";
  EXPECT_FALSE(patch(condition).ok());
}

TEST_F(TrainingJobCrdApiTest, KubectlGetPrintsTheProgressAsPeopleReadIt) {
  // The state the issue measured: 0.6037 epochs of 4, 96.66%, gap 2.1723.
  json job;
  ASSERT_TRUE(Create(TestJob("mnist", "{data: {path: /data}, training: {epochs: 4, target: "
                                  "{metric: top5_accuracy, atLeast: 0.999}}, "
                                  "workers: {replicas: 2}, evaluator: {template: {spec: "
                                  "{containers: [{command: [eval]}]}}}}"),
                     &job)
                  .ok());
  ASSERT_TRUE(Create(TestJob("fresh", "{data: {path: /data}, training: {maxUpdates: 1000}}")).ok());

  // The status the operator writes once the pods run and the coordinator
  // and the master report: PlanReconcile, its children carried out in
  // memory until it plans nothing more.
  trainingjob::CoordinatorStatus coordinator;
  coordinator.phase = "Running";
  coordinator.epoch = 2;
  coordinator.samples_done_in_epoch = 3750;
  coordinator.samples_in_epoch = 12000;
  coordinator.master_version = 2706;
  coordinator.test_accuracy = 0.9845;
  coordinator.test_loss = 0.05;
  coordinator.test_metrics["top5_accuracy"] = 0.9975;
  trainingjob::MasterProgress master;
  master.model_version = 2706;
  master.mean_gap = 2.1723000994419266;
  master.mean_staleness = 2.4;
  master.updates_per_second = 270.4;
  std::map<std::string, std::vector<json>> children;
  json status;
  for (int i = 0; i < 8; ++i) {
    trainingjob::ObservedJob o = trainingjob::ObserveJob(job);
    o.pods = children["Pod"];
    o.services = children["Service"];
    o.network_policies = children["NetworkPolicy"];
    o.config_maps = children["ConfigMap"];
    o.persistent_volume_claims = children["PersistentVolumeClaim"];
    o.coordinator = coordinator;
    o.master = master;
    o.now = std::chrono::system_clock::now();
    trainingjob::OperatorConfig config;
    config.image = "ghcr.io/gaptrain/gaptrain:0.1.0";
    const trainingjob::ReconcilePlan plan = trainingjob::PlanReconcile(o, config);
    if (plan.applies.empty() && !plan.status && !plan.ledger) break;
    for (const trainingjob::ChildApply& a : plan.applies) {
      json object = a.object;
      object["metadata"]["uid"] = trainingjob::NameOf(object) + "-uid";
      if (object["kind"] == "Pod") {
        object["status"] = {{"phase", "Running"},
                            {"podIP", "10.0.0.9"},
                            {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}};
      }
      std::vector<json>& list = children[object["kind"].get<std::string>()];
      list.erase(std::remove_if(list.begin(), list.end(),
                                [&](const json& have) {
                                  return trainingjob::NameOf(have) ==
                                         trainingjob::NameOf(object);
                                }),
                 list.end());
      list.push_back(object);
    }
    if (plan.ledger) {
      job["metadata"]["annotations"][trainingjob::kPodLedgerAnnotation] =
          trainingjob::PodLedgerText(*plan.ledger);
    }
    if (plan.status) job["status"] = status = *plan.status;
  }
  ASSERT_EQ(status["phase"], "Running") << status.dump(2);

  // Written as the operator writes it: a merge patch of the status subresource.
  const Status patched = cluster_->admin()->MergePatch(
      kube::kTrainingJobs.Subresource("status"), ns_, "mnist", {{"status", status}}, nullptr);
  ASSERT_TRUE(patched.ok()) << patched.ToString();

  std::string table;
  ASSERT_TRUE(cluster_->Kubectl({"get", "tj", "-n", ns_}, &table).ok()) << table;
  std::cout << table;
  std::map<std::string, std::string> running = TableRow(table, "mnist");
  EXPECT_EQ(running.erase("AGE"), 1u) << table;
  EXPECT_EQ(running, (std::map<std::string, std::string>{{"NAME", "mnist"},
                                                         {"STATE", "Running"},
                                                         {"WORKERS", "2/2"},
                                                         {"EPOCH", "2.3/4"},
                                                         {"ACCURACY", "98.45%"},
                                                         {"TARGET", "top5_accuracy 0.9975 (>= 0.999)"},
                                                         {"GAP", "2.17"},
                                                         {"UPDATES/S", "270"}}))
      << table;
  // A job with no status yet: empty cells.
  const std::map<std::string, std::string> fresh = TableRow(table, "fresh");
  for (const char* column :
       {"STATE", "WORKERS", "EPOCH", "ACCURACY", "TARGET", "GAP", "UPDATES/S"}) {
    EXPECT_EQ(fresh.count(column) ? fresh.at(column) : "?", "") << column << "\n" << table;
  }

  // The numbers stay for machines.
  std::string epoch;
  ASSERT_TRUE(cluster_->Kubectl({"get", "tj", "mnist", "-n", ns_, "-o",
                                 "jsonpath={.status.progress.epoch} "
                                 "{.status.progress.testAccuracy} {.status.progress.meanGap} "
                                 "{.status.progress.updatesPerSecond} "
                                 "{.status.progress.testMetrics.top5_accuracy}"},
                                &epoch)
                  .ok())
      << epoch;
  EXPECT_EQ(epoch, "2.3125 0.9845 2.1723000994419266 270.4 0.9975");
}

}  // namespace
}  // namespace gaptrain
