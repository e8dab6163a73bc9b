// PlanReconcile, one case (or table) per rule of the contract: creation,
// each preemption signal, failures under each restartPolicy, backoffLimit,
// master and coordinator loss, scaling, suspend and resume, the deadline,
// the TTL, completion with each cleanPodPolicy, invalid specs. Each case
// then carries its plans out on a small in-memory cluster until a
// reconcile plans nothing, checks nothing is counted twice, and checks
// that a later reconcile (time moved on) still writes nothing.

#include "operator/trainingjob/reconcile.h"

#include "operator/trainingjob/gang_release.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "operator/crd/schema_check.h"
#include "operator/crd/trainingjob_crd.h"
#include "operator/testing/coordinator_status_examples.h"
#include "operator/trainingjob/cached_fields.h"
#include "operator/trainingjob/desired_children.h"
#include "operator/trainingjob/kueue_admission_example.h"
#include "operator/trainingjob/object_fields.h"
#include "operator/trainingjob/pod_ledger.h"
#include "operator/trainingjob/recorded_image.h"

namespace gaptrain {
namespace trainingjob {
namespace {

// status in the CRD's schema (deploy/crd), as the API server holds it.
const YAML::Node& StatusSchema() {
  static const YAML::Node* const schema = new YAML::Node(
      YAML::Load(TrainingJobCrdYaml())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
                                       ["properties"]["status"]);
  return *schema;
}

using nlohmann::json;
using std::chrono::seconds;
using Clock = std::chrono::system_clock;

const Clock::time_point kStart = Clock::from_time_t(1795413600);  // 2026-11-23T06:00:00Z

json BaseJob() {
  return json::parse(R"j({
    "apiVersion": "gaptrain.io/v1alpha1", "kind": "TrainingJob",
    "metadata": {"name": "mnist", "namespace": "default", "uid": "job-uid", "generation": 1,
                 "resourceVersion": "100"},
    "spec": {"data": {"path": "/data/mnist"}, "training": {"epochs": 4},
             "workers": {"replicas": 2}}})j");
}

// The API server's side of the tests: what exists, and plans carried out
// the way the server would.
class Cluster {
 public:
  explicit Cluster(json job) : job_(std::move(job)) {}

  json& job() { return job_; }
  const json& status() const { return job_["status"]; }
  std::vector<json>& pods() { return pods_; }
  Clock::time_point now = kStart;
  std::optional<CoordinatorStatus> coordinator;
  std::optional<MasterProgress> master;
  std::optional<MasterScrape> master_scrape;

  // The job and its children as the operator's caches hold them
  // (cached_fields.h): every case plans from trimmed objects.
  ObservedJob Observe() const {
    json job = job_;
    TrimCachedObject(&job);
    ObservedJob o = ObserveJob(std::move(job));
    o.pods = pods_;
    for (json& pod : o.pods) TrimCachedPod(&pod);
    o.services = services_;
    o.config_maps = config_maps_;
    o.persistent_volume_claims = claims_;
    o.network_policies = policies_;  // never the Secrets: the operator reads none
    for (auto* list : {&o.services, &o.config_maps, &o.persistent_volume_claims,
                       &o.network_policies}) {
      for (json& object : *list) TrimCachedObject(&object);
    }
    o.workloads = workloads_;
    o.resource_flavors = resource_flavors;
    o.coordinator = coordinator;
    o.master = master;
    o.master_scrape = master_scrape;
    o.now = now;
    for (size_t i = 0; i < o.token_bytes.size(); ++i) o.token_bytes[i] = static_cast<uint8_t>(i);
    o.tls = tls;
    return o;
  }

  // Every status a reconcile writes must fit the CRD's status schema: the
  // API server prunes a field the schema lacks, silently.
  ReconcilePlan Plan(const OperatorConfig& config = OperatorConfig()) const {
    ReconcilePlan plan = PlanReconcile(Observe(), config);
    if (plan.status) {
      EXPECT_EQ(CheckAgainstSchema(StatusSchema(), YAML::Load(plan.status->dump()), "status"),
                std::vector<std::string>{})
          << plan.status->dump(2);
    }
    return plan;
  }

  void Carry(const ReconcilePlan& plan) {
    if (plan.ledger) {
      job_["metadata"]["annotations"][kPodLedgerAnnotation] = PodLedgerText(*plan.ledger);
    }
    for (const auto& [key, value] : plan.annotations) job_["metadata"]["annotations"][key] = value;
    for (const ChildDelete& d : plan.deletes) {
      auto& list = ListOf(d.resource.kind);
      for (auto it = list.begin(); it != list.end(); ++it) {
        if (NameOf(*it) == d.name && (d.uid.empty() || UidOf(*it) == d.uid)) {
          list.erase(it);
          break;
        }
      }
    }
    for (const ChildApply& a : plan.applies) {
      auto& list = ListOf(a.resource.kind);
      json object = a.object;
      bool replaced = false;
      for (json& have : list) {
        if (NameOf(have) == NameOf(object)) {
          if (a.create_only) {
            replaced = true;
            break;
          }
          object["metadata"]["uid"] = UidOf(have);
          // An apply leaves the status (a subresource) as it is.
          if (have.contains("status")) object["status"] = have["status"];
          have = object;
          replaced = true;
        }
      }
      if (!replaced) {
        object["metadata"]["uid"] = NameOf(object) + "-uid-" + std::to_string(++uids_);
        list.push_back(object);
      }
    }
    for (const ChildStatusPatch& p : plan.status_patches) {
      for (json& have : ListOf(p.resource.kind)) {
        if (NameOf(have) != p.name) continue;
        EXPECT_EQ(p.patch["metadata"]["resourceVersion"], have["metadata"]["resourceVersion"]);
        have["status"].merge_patch(p.patch["status"]);
      }
    }
    if (plan.status) job_["status"] = *plan.status;
    if (plan.scale_to) {  // the scale subresource: the spec changes, and its generation
      job_["spec"]["workers"]["replicas"] = *plan.scale_to;
      job_["metadata"]["generation"] = job_["metadata"].value("generation", 0) + 1;
    }
    if (plan.delete_job) job_deleted = true;
    job_["metadata"]["resourceVersion"] =
        std::to_string(std::stoi(job_["metadata"]["resourceVersion"].get<std::string>()) + 1);
  }

  // Plans and carries out until a plan writes nothing; the plans made.
  std::vector<ReconcilePlan> Settle(const OperatorConfig& config = OperatorConfig()) {
    std::vector<ReconcilePlan> plans;
    for (int i = 0; i < 8; ++i) {
      plans.push_back(Plan(config));
      if (plans.back().WritesNothing()) return plans;
      Carry(plans.back());
    }
    ADD_FAILURE() << "the reconcile does not settle";
    return plans;
  }

  json* Pod(const std::string& name) {
    for (json& p : pods_) {
      if (NameOf(p) == name) return &p;
    }
    return nullptr;
  }

  void SetPodStatus(const std::string& name, const json& status) {
    json* p = Pod(name);
    ASSERT_NE(p, nullptr) << name;
    (*p)["status"] = status;
  }

  // Every pod running and ready.
  void RunAll() {
    for (json& p : pods_) {
      p["status"] = json::parse(R"j({"phase": "Running", "podIP": "10.0.0.9",
          "conditions": [{"type": "Ready", "status": "True"}]})j");
    }
  }

  void Terminate(const std::string& name) {
    json* p = Pod(name);
    ASSERT_NE(p, nullptr) << name;
    (*p)["metadata"]["deletionTimestamp"] = "2026-11-23T06:00:00Z";
  }

  size_t Count(const char* kind) { return ListOf(kind).size(); }
  // The objects of `kind` ("Secret", "NetworkPolicy", ...) in the cluster.
  std::vector<json>& objects(std::string_view kind) { return ListOf(kind); }
  bool job_deleted = false;
  std::vector<json> resource_flavors;
  JobTls tls;  // none: the operator issued no certificate, so plaintext

 private:
  std::vector<json>& ListOf(std::string_view kind) {
    if (kind == "Pod") return pods_;
    if (kind == "Service") return services_;
    if (kind == "Secret") return secrets_;
    if (kind == "ConfigMap") return config_maps_;
    if (kind == "NetworkPolicy") return policies_;
    if (kind == "Workload") return workloads_;
    return claims_;
  }

  json job_;
  std::vector<json> pods_, services_, secrets_, config_maps_, claims_, policies_, workloads_;
  int uids_ = 0;
};

CoordinatorStatus CoordinatorIn(const std::string& phase) {
  CoordinatorStatus c;
  c.phase = phase;
  c.reason = phase == "Succeeded" ? "EpochsDone" : "";
  c.message = phase == "Succeeded" ? "4 epochs done" : "";
  return c;
}

// A job whose children exist and run, with the coordinator reporting Running.
Cluster RunningCluster(json job = BaseJob()) {
  Cluster c(std::move(job));
  c.Settle();
  c.RunAll();
  c.coordinator = CoordinatorIn("Running");
  c.Settle();
  EXPECT_EQ(c.status()["phase"], "Running");
  return c;
}

bool HasReason(const ReconcilePlan& plan, const std::string& reason) {
  for (const PlannedEvent& e : plan.events) {
    if (e.reason == reason) return true;
  }
  return false;
}

const PlannedEvent* EventWith(const ReconcilePlan& plan, const std::string& reason) {
  for (const PlannedEvent& e : plan.events) {
    if (e.reason == reason) return &e;
  }
  return nullptr;
}

json ConditionOf(const json& status, const std::string& type) {
  for (const json& c : status["conditions"]) {
    if (c["type"] == type) return c;
  }
  return nullptr;
}

// After settling, a later reconcile (time moved on, nothing else changed)
// writes nothing: conditions and timestamps are stable.
void ExpectQuietLater(Cluster* c, const OperatorConfig& config = OperatorConfig()) {
  c->now += seconds(97);
  const ReconcilePlan later = c->Plan(config);
  EXPECT_TRUE(later.WritesNothing())
      << (later.status ? later.status->dump(2) : "") << " applies " << later.applies.size()
      << " deletes " << later.deletes.size();
}

// --- creation and steady state ----------------------------------------------

TEST(ReconcileTest, CreatesEveryChildAndThenNothing) {
  Cluster c(BaseJob());
  const ReconcilePlan plan = c.Plan();
  std::vector<std::string> created;
  for (const ChildApply& a : plan.applies) {
    EXPECT_TRUE(a.creates);
    created.push_back(ChildKey(a.resource, NameOf(a.object)));
  }
  EXPECT_EQ(created, (std::vector<std::string>{
                         "ConfigMap/mnist-job", "PersistentVolumeClaim/mnist-checkpoints",
                         "PersistentVolumeClaim/mnist-coordinator-state", "Service/mnist-master",
                         "Service/mnist-coordinator", "NetworkPolicy/mnist-ingress",
                         "Secret/mnist-token", "Pod/mnist-master", "Pod/mnist-coordinator",
                         "Pod/mnist-evaluator", "Pod/mnist-trainer-0", "Pod/mnist-trainer-1"}));
  for (const ChildApply& a : plan.applies) {
    EXPECT_EQ(a.create_only, a.resource.kind == "Secret") << NameOf(a.object);
  }
  EXPECT_TRUE(plan.deletes.empty());
  EXPECT_FALSE(plan.ledger.has_value());
  ASSERT_TRUE(plan.status.has_value());
  const json& status = *plan.status;
  EXPECT_EQ(status["phase"], "Pending");
  EXPECT_EQ(status["startTime"], "2026-11-23T06:00:00Z");
  EXPECT_EQ(status["observedGeneration"], 1);
  EXPECT_EQ(ConditionOf(status, "Created")["reason"], "TrainingJobCreated");
  EXPECT_EQ(ConditionOf(status, "Created")["lastTransitionTime"], "2026-11-23T06:00:00Z");
  EXPECT_EQ(status["workers"], json::parse(R"j({"active": 0, "ready": 0, "desired": 2,
      "selector": "gaptrain.io/job-name=mnist,gaptrain.io/replica-type=trainer",
      "summary": "0/2"})j"));
  EXPECT_EQ(status["preemptions"], 0);
  EXPECT_EQ(status["replicaStatuses"]["Trainer"],
            json::parse(R"j({"active": 0, "ready": 0, "succeeded": 0, "failed": 0})j"));
  EXPECT_TRUE(HasReason(plan, "TrainingJobCreated"));
  EXPECT_TRUE(HasReason(plan, "SuccessfulCreatePod"));
  EXPECT_EQ(EventWith(plan, "SuccessfulCreatePod")->after, PlannedEvent::After::kChild);
  // Nothing of it runs yet: no progress to poll, its pods' events wake it.
  EXPECT_EQ(plan.requeue_after, std::nullopt);

  c.Carry(plan);
  const ReconcilePlan second = c.Plan();
  EXPECT_TRUE(second.WritesNothing()) << (second.status ? second.status->dump(2) : "");
  EXPECT_TRUE(second.events.empty());
  ExpectQuietLater(&c);
}

// The operator reads no Secret: the token is created (create-only) with
// each pod a plan creates, before it, and in no other plan.
TEST(ReconcileTest, TheTokenSecretComesWithEachPodCreated) {
  Cluster c = RunningCluster();
  c.objects("Secret").clear();  // deleted by hand: unseen, so nothing to write
  EXPECT_TRUE(c.Plan().WritesNothing());
  auto& pods = c.pods();
  pods.erase(std::remove_if(pods.begin(), pods.end(),
                            [](const json& p) { return NameOf(p) == "mnist-trainer-0"; }),
             pods.end());
  const ReconcilePlan plan = c.Plan();
  ASSERT_EQ(plan.applies.size(), 2u);
  EXPECT_EQ(ChildKey(plan.applies[0].resource, NameOf(plan.applies[0].object)),
            "Secret/mnist-token");
  EXPECT_TRUE(plan.applies[0].create_only);  // an existing token is kept
  EXPECT_TRUE(plan.applies[0].creates);
  EXPECT_EQ(ChildKey(plan.applies[1].resource, NameOf(plan.applies[1].object)),
            "Pod/mnist-trainer-0");
  c.Carry(plan);
  EXPECT_EQ(c.Count("Secret"), 1u);
  c.RunAll();
  c.Settle();
  ExpectQuietLater(&c);
}

// The job's NetworkPolicy is there while the job is, as the operator's
// settings say: recreated when deleted, its rules changed when a setting
// changes (a rule taken away too), none when it is off.
TEST(ReconcileTest, TheNetworkPolicyFollowsTheOperatorsSettings) {
  OperatorConfig config;
  Cluster c(BaseJob());
  c.Settle(config);
  ASSERT_EQ(c.Count("NetworkPolicy"), 1u);
  EXPECT_EQ(c.objects("NetworkPolicy")[0]["spec"],
            JobNetworkPolicy(c.job(), config.network_policy)["spec"]);

  c.objects("NetworkPolicy").clear();
  ReconcilePlan plan = c.Plan(config);
  ASSERT_EQ(plan.applies.size(), 1u);
  EXPECT_EQ(ChildKey(plan.applies[0].resource, NameOf(plan.applies[0].object)),
            "NetworkPolicy/mnist-ingress");
  EXPECT_TRUE(plan.applies[0].creates);
  EXPECT_TRUE(HasReason(plan, "SuccessfulCreateNetworkPolicy"));
  c.Carry(plan);

  config.network_policy.prometheus_namespace = "monitoring";
  plan = c.Plan(config);
  ASSERT_EQ(plan.applies.size(), 1u);
  EXPECT_FALSE(plan.applies[0].creates);
  EXPECT_EQ(plan.applies[0].object["spec"]["ingress"].size(), 3u);
  c.Carry(plan);
  EXPECT_TRUE(c.Plan(config).WritesNothing());
  config.network_policy.prometheus_namespace = "";
  plan = c.Plan(config);
  ASSERT_EQ(plan.applies.size(), 1u);
  EXPECT_EQ(plan.applies[0].object["spec"]["ingress"].size(), 2u);
  c.Carry(plan);
  ExpectQuietLater(&c, config);

  // Off: nothing planned for it (the one there goes with its job).
  config.network_policy.enabled = false;
  EXPECT_TRUE(c.Plan(config).WritesNothing());
  Cluster without(BaseJob());
  without.Settle(config);
  EXPECT_EQ(without.Count("NetworkPolicy"), 0u);
  EXPECT_EQ(without.Count("Pod"), 5u);
}

TEST(ReconcileTest, RunsWhenTheCoordinatorSaysSoAndShowsProgress) {
  Cluster c(BaseJob());
  c.Settle();
  c.RunAll();
  CoordinatorStatus coordinator = CoordinatorIn("Running");
  coordinator.epoch = 1;
  coordinator.samples_done_in_epoch = 30000;
  coordinator.samples_in_epoch = 60000;
  coordinator.master_version = 900;
  coordinator.test_accuracy = 0.97;
  coordinator.test_loss = 0.1;
  c.coordinator = coordinator;
  MasterProgress master;
  master.model_version = 1200;
  master.mean_gap = 1.6;
  master.mean_staleness = 3.5;
  master.updates_per_second = 40;
  c.master = master;
  const ReconcilePlan plan = c.Plan();
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["phase"], "Running");
  EXPECT_EQ(ConditionOf(*plan.status, "Running")["status"], "True");
  EXPECT_EQ((*plan.status)["progress"], json::parse(R"j({"epoch": 1.5, "modelVersion": 1200,
      "testAccuracy": 0.97, "testLoss": 0.1, "meanGap": 1.6, "meanStaleness": 3.5,
      "updatesPerSecond": 40})j"));
  // And as kubectl get prints them.
  EXPECT_EQ((*plan.status)["display"], json::parse(R"j({"epoch": "1.5/4", "accuracy": "97.00%",
      "gap": "1.60", "updatesPerSecond": "40"})j"));
  EXPECT_EQ((*plan.status)["workers"]["summary"], "2/2");
  EXPECT_EQ((*plan.status)["replicaStatuses"]["Master"]["ready"], 1);
  EXPECT_TRUE(HasReason(plan, "TrainingJobRunning"));
  c.Carry(plan);
  ExpectQuietLater(&c);

  // Unreachable now: the last progress stays.
  c.coordinator.reset();
  c.master.reset();
  EXPECT_TRUE(c.Plan().WritesNothing());
  // New numbers are a change.
  master.model_version = 1300;
  c.master = master;
  ASSERT_TRUE(c.Plan().status.has_value());
  EXPECT_EQ((*c.Plan().status)["progress"]["modelVersion"], 1300);
}

// A job that finished keeps the progress it finished with: the master's
// numbers drifting afterwards (its update rate decays to 0 once nothing
// pushes) are not a change to write (the operator e2e test saw such a
// write on an idle reconcile).
TEST(ReconcileTest, AFinishedJobsProgressIsNotRewritten) {
  json job = BaseJob();
  job["status"] = json::parse(R"j({"phase": "Succeeded", "completionTime": "2026-11-23T06:00:00Z",
      "conditions": [{"type": "Succeeded", "status": "True"}],
      "progress": {"modelVersion": 1200, "updatesPerSecond": 40, "testAccuracy": 0.98},
      "display": {"accuracy": "98.00%"}})j");
  Cluster c(job);
  c.Settle();
  MasterProgress master;
  master.model_version = 1200;
  master.updates_per_second = 3;
  master.mean_gap = 1.1;
  c.master = master;
  CoordinatorStatus coordinator = CoordinatorIn("Succeeded");
  coordinator.master_version = 1200;
  coordinator.test_accuracy = 0.5;
  c.coordinator = coordinator;
  const ReconcilePlan plan = c.Plan();
  EXPECT_FALSE(plan.status.has_value()) << plan.status->dump(2);
  EXPECT_EQ(c.status()["progress"]["updatesPerSecond"], 40);
  EXPECT_EQ(c.status()["progress"]["testAccuracy"], 0.98);
  EXPECT_EQ(c.status()["display"], json::parse(R"j({"accuracy": "98.00%"})j"));
}

TEST(ReconcileTest, WithoutTheCoordinatorEnoughReadyTrainersMeanRunning) {
  json job = BaseJob();
  job["spec"]["workers"]["minReplicas"] = 1;
  Cluster c(job);
  c.Settle();
  c.RunAll();
  c.SetPodStatus("mnist-trainer-1", json::parse(R"j({"phase": "Pending"})j"));
  c.Settle();
  EXPECT_EQ(c.status()["phase"], "Running");
  c.SetPodStatus("mnist-trainer-0", json::parse(R"j({"phase": "Running"})j"));  // not ready
  const ReconcilePlan plan = c.Plan();
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["phase"], "Pending");
  EXPECT_EQ(ConditionOf(*plan.status, "Running")["status"], "False");
  EXPECT_EQ(ConditionOf(*plan.status, "Running")["reason"], "TrainingJobPending");
}

// --- preemption ---------------------------------------------------------------

struct PreemptionCase {
  const char* name;
  json status;
  bool terminating;
  std::optional<int64_t> grace;  // of the delete; nullopt: none planned
  bool delete_planned;
};

TEST(ReconcileTest, EachPreemptionSignalIsCountedOnceAndRecreated) {
  const PreemptionCase cases[] = {
      {"DisruptionTarget on a failed pod",
       json::parse(R"j({"phase": "Failed", "conditions": [{"type": "DisruptionTarget",
           "status": "True", "reason": "TerminationByKubelet"}],
           "containerStatuses": [{"name": "gaptrain",
              "state": {"terminated": {"exitCode": 143}}}]})j"),
       false, 0, true},
      {"DisruptionTarget while running",
       json::parse(R"j({"phase": "Running", "conditions": [{"type": "DisruptionTarget",
           "status": "True", "reason": "PreemptionByScheduler"}]})j"),
       false, std::nullopt, true},
      {"evicted", json::parse(R"j({"phase": "Failed", "reason": "Evicted"})j"), false, 0, true},
      {"node lost", json::parse(R"j({"phase": "Running", "reason": "NodeLost"})j"), false, 0, true},
      {"node shutdown", json::parse(R"j({"phase": "Failed", "reason": "Terminated"})j"), false, 0,
       true},
      {"deleted by someone else", json::parse(R"j({"phase": "Running"})j"), true, std::nullopt,
       false},
      {"exited 0 before the end",
       json::parse(R"j({"phase": "Succeeded", "containerStatuses": [{"name": "gaptrain",
           "state": {"terminated": {"exitCode": 0}}}]})j"),
       false, 0, true},
  };
  for (const PreemptionCase& pc : cases) {
    SCOPED_TRACE(pc.name);
    Cluster c = RunningCluster();
    const std::string old_uid = UidOf(*c.Pod("mnist-trainer-1"));
    c.SetPodStatus("mnist-trainer-1", pc.status);
    if (pc.terminating) c.Terminate("mnist-trainer-1");

    const ReconcilePlan plan = c.Plan();
    ASSERT_TRUE(plan.ledger.has_value());
    EXPECT_EQ(plan.ledger->preemptions, 1u);
    EXPECT_EQ(plan.ledger->failures, 0u);
    EXPECT_EQ(plan.ledger->counted, (std::set<std::string>{old_uid}));
    ASSERT_TRUE(plan.status.has_value());
    EXPECT_EQ((*plan.status)["preemptions"], 1);
    const PlannedEvent* event = EventWith(plan, "WorkerPreempted");
    ASSERT_NE(event, nullptr);
    EXPECT_EQ(event->after, PlannedEvent::After::kLedger);
    EXPECT_EQ(event->type, "Normal");
    if (pc.delete_planned) {
      ASSERT_EQ(plan.deletes.size(), 1u);
      EXPECT_EQ(plan.deletes[0].name, "mnist-trainer-1");
      EXPECT_EQ(plan.deletes[0].uid, old_uid);
      EXPECT_EQ(plan.deletes[0].grace_period_seconds, pc.grace);
    } else {
      EXPECT_TRUE(plan.deletes.empty());
    }
    EXPECT_TRUE(plan.applies.empty());  // the name is still taken

    // The same observation again, with the ledger written (a delete that
    // failed, a reconcile before the pod went): not counted again.
    c.Carry([&] {
      ReconcilePlan ledger_only;
      ledger_only.ledger = plan.ledger;
      ledger_only.status = plan.status;
      return ledger_only;
    }());
    for (int i = 0; i < 3; ++i) {
      const ReconcilePlan again = c.Plan();
      EXPECT_FALSE(again.ledger.has_value());
      EXPECT_FALSE(HasReason(again, "WorkerPreempted"));
      EXPECT_EQ(again.deletes.size(), pc.delete_planned ? 1u : 0u);
    }

    // The pod goes; its replacement comes; the count stays 1.
    auto& pods = c.pods();
    pods.erase(std::remove_if(pods.begin(), pods.end(),
                              [](const json& p) { return NameOf(p) == "mnist-trainer-1"; }),
               pods.end());
    const ReconcilePlan replace = c.Plan();
    ASSERT_EQ(replace.applies.size(), 2u);  // the token, then the pod that mounts it
    EXPECT_EQ(NameOf(replace.applies[0].object), "mnist-token");
    EXPECT_EQ(NameOf(replace.applies[1].object), "mnist-trainer-1");
    c.Settle();
    EXPECT_NE(UidOf(*c.Pod("mnist-trainer-1")), old_uid);
    EXPECT_EQ(c.status()["preemptions"], 1);
    EXPECT_EQ(c.status()["failures"], 0);
    c.RunAll();
    c.Settle();
    EXPECT_EQ(c.status()["phase"], "Running");
    EXPECT_EQ(c.status()["preemptions"], 1);
    ExpectQuietLater(&c);
  }
}

TEST(ReconcileTest, AStaleLedgerEntryDoesNotRecount) {
  // Two reconciles from the same observation: the second is what a
  // reconcile on a stale job would compute; its ledger write carries the
  // old resourceVersion and fails (plan_executor), so only one counts.
  Cluster c = RunningCluster();
  c.SetPodStatus("mnist-trainer-0", json::parse(R"j({"phase": "Failed", "reason": "Evicted"})j"));
  const ReconcilePlan a = c.Plan();
  const ReconcilePlan b = c.Plan();
  ASSERT_TRUE(a.ledger && b.ledger);
  EXPECT_EQ(*a.ledger, *b.ledger);  // the same plan: deterministic
  c.Carry(a);
  const ReconcilePlan after = c.Plan();
  EXPECT_FALSE(after.ledger.has_value());
  c.Settle();
  EXPECT_EQ(c.status()["preemptions"], 1);
}

// --- failures -------------------------------------------------------------

json FailedWith(int exit_code) {
  json status = json::parse(R"j({"phase": "Failed", "containerStatuses": [{"name": "gaptrain",
      "state": {"terminated": {"reason": "Error"}}}]})j");
  status["containerStatuses"][0]["state"]["terminated"]["exitCode"] = exit_code;
  return status;
}

TEST(ReconcileTest, FailuresUnderEachRestartPolicy) {
  struct Case {
    const char* policy;
    int exit_code;
    bool recreated;
  } cases[] = {
      {"OnFailure", 1, true}, {"Always", 2, true},   {"Never", 1, false},
      {"Never", 137, false},  {"ExitCode", 1, false}, {"ExitCode", 127, false},
      {"ExitCode", 128, true}, {"ExitCode", 137, true}, {"ExitCode", 255, true},
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(std::string(tc.policy) + " exit " + std::to_string(tc.exit_code));
    json job = BaseJob();
    job["spec"]["workers"]["restartPolicy"] = tc.policy;
    job["spec"]["workers"]["replicas"] = 3;
    job["spec"]["workers"]["minReplicas"] = 2;
    Cluster c = RunningCluster(job);
    const std::string old_uid = UidOf(*c.Pod("mnist-trainer-2"));
    c.SetPodStatus("mnist-trainer-2", FailedWith(tc.exit_code));
    const ReconcilePlan plan = c.Plan();
    ASSERT_TRUE(plan.ledger.has_value());
    EXPECT_EQ(plan.ledger->failures, 1u);
    EXPECT_EQ(plan.ledger->preemptions, 0u);
    const PlannedEvent* event = EventWith(plan, "WorkerFailed");
    ASSERT_NE(event, nullptr);
    EXPECT_EQ(event->type, "Warning");
    EXPECT_NE(event->note.find("exit code " + std::to_string(tc.exit_code)), std::string::npos)
        << event->note;
    EXPECT_EQ(plan.deletes.size(), tc.recreated ? 1u : 0u);
    c.Settle();
    c.RunAll();
    if (!tc.recreated) c.SetPodStatus("mnist-trainer-2", FailedWith(tc.exit_code));
    c.Settle();
    EXPECT_EQ(c.status()["failures"], 1);
    EXPECT_EQ(c.status()["phase"], "Running");  // 2 trainers left >= minReplicas 2
    EXPECT_EQ(UidOf(*c.Pod("mnist-trainer-2")) != old_uid, tc.recreated);
    ExpectQuietLater(&c);
  }
}

// A user's trainer command (spec.workers.template's command): its pods
// are created with it, a failure counts and is recreated by restartPolicy
// as gaptrain-worker's, and the replacement runs the same command.
TEST(ReconcileTest, TrainersRunningTheTemplatesCommandAreSupervisedAlike) {
  json job = BaseJob();
  job["spec"]["workers"]["template"] = json::parse(R"j({"spec": {"containers": [
      {"image": "registry.example.com/trainer:1", "command": ["python3", "/app/train.py"]}]}})j");
  Cluster c = RunningCluster(job);
  const json expected = json::parse(R"j(["python3", "/app/train.py"])j");
  EXPECT_EQ((*c.Pod("mnist-trainer-1"))["spec"]["containers"][0]["command"], expected);
  EXPECT_EQ((*c.Pod("mnist-evaluator"))["spec"]["containers"][0]["command"][0],
            "gaptrain-worker");
  const std::string old_uid = UidOf(*c.Pod("mnist-trainer-1"));
  c.SetPodStatus("mnist-trainer-1", FailedWith(1));
  const ReconcilePlan plan = c.Plan();
  ASSERT_TRUE(plan.ledger.has_value());
  EXPECT_EQ(plan.ledger->failures, 1u);
  EXPECT_EQ(plan.deletes.size(), 1u);  // OnFailure: recreated
  c.Settle();
  c.RunAll();
  c.Settle();
  EXPECT_NE(UidOf(*c.Pod("mnist-trainer-1")), old_uid);
  EXPECT_EQ((*c.Pod("mnist-trainer-1"))["spec"]["containers"][0]["command"], expected);
  EXPECT_EQ(c.status()["failures"], 1);
  EXPECT_EQ(c.status()["phase"], "Running");
  ExpectQuietLater(&c);
}

TEST(ReconcileTest, BackoffLimitExceededFailsTheJob) {
  json job = BaseJob();
  job["spec"]["runPolicy"] = {{"backoffLimit", 1}};
  Cluster c = RunningCluster(job);
  c.SetPodStatus("mnist-trainer-0", FailedWith(1));
  c.Settle();
  c.RunAll();
  c.Settle();
  EXPECT_EQ(c.status()["failures"], 1);
  EXPECT_EQ(c.status()["phase"], "Running");  // 1 failure is within backoffLimit 1

  c.SetPodStatus("mnist-trainer-1", FailedWith(2));
  const ReconcilePlan plan = c.Plan();
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["phase"], "Failed");
  EXPECT_EQ((*plan.status)["failures"], 2);
  const json failed = ConditionOf(*plan.status, "Failed");
  EXPECT_EQ(failed["status"], "True");
  EXPECT_EQ(failed["reason"], "BackoffLimitExceeded");
  EXPECT_EQ(failed["message"], "2 failures exceed backoffLimit (1)");
  EXPECT_EQ(ConditionOf(*plan.status, "Running")["status"], "False");
  EXPECT_EQ((*plan.status)["completionTime"], "2026-11-23T06:00:00Z");
  EXPECT_EQ(EventWith(plan, "BackoffLimitExceeded")->type, "Warning");
  // cleanPodPolicy Running: the running pods go, the failed one stays.
  std::set<std::string> deleted;
  for (const ChildDelete& d : plan.deletes) deleted.insert(d.name);
  EXPECT_EQ(deleted, (std::set<std::string>{"mnist-master", "mnist-coordinator",
                                            "mnist-evaluator", "mnist-trainer-0"}));
  EXPECT_TRUE(plan.applies.empty());
  c.Settle();
  EXPECT_EQ(c.Count("Pod"), 1u);
  ExpectQuietLater(&c);
}

TEST(ReconcileTest, TooFewTrainersLeftFailsTheJob) {
  json job = BaseJob();
  job["spec"]["workers"]["restartPolicy"] = "Never";
  job["spec"]["workers"]["minReplicas"] = 2;
  Cluster c = RunningCluster(job);
  c.SetPodStatus("mnist-trainer-1", FailedWith(1));
  const ReconcilePlan plan = c.Plan();
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["phase"], "Failed");
  EXPECT_EQ(ConditionOf(*plan.status, "Failed")["reason"], "TrainingJobFailed");
  EXPECT_NE(ConditionOf(*plan.status, "Failed")["message"].get<std::string>().find(
                "1 trainers failed permanently (restartPolicy Never)"),
            std::string::npos);
}

// --- master and coordinator -------------------------------------------------

TEST(ReconcileTest, MasterOrCoordinatorLossRestartsTheJob) {
  struct Case {
    const char* pod;
    json status;
    bool terminating;
    bool counts_as_failure;
    const char* event;
  } cases[] = {
      {"mnist-master", FailedWith(137), false, true, "MasterRestarting"},
      {"mnist-master", json::parse(R"j({"phase": "Running"})j"), true, false, "MasterRestarting"},
      {"mnist-coordinator",
       json::parse(R"j({"phase": "Failed", "conditions": [{"type": "DisruptionTarget",
           "status": "True", "reason": "EvictionByEvictionAPI"}]})j"),
       false, false, "CoordinatorRestarting"},
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(std::string(tc.pod) + " " + tc.event);
    Cluster c = RunningCluster();
    const std::string old_uid = UidOf(*c.Pod(tc.pod));
    c.SetPodStatus(tc.pod, tc.status);
    if (tc.terminating) c.Terminate(tc.pod);
    c.coordinator.reset();  // its /status is gone with it (or the master's)
    const ReconcilePlan plan = c.Plan();
    ASSERT_TRUE(plan.ledger.has_value());
    EXPECT_EQ(plan.ledger->restarts, 1u);
    EXPECT_EQ(plan.ledger->failures, tc.counts_as_failure ? 1u : 0u);
    const PlannedEvent* event = EventWith(plan, tc.event);
    ASSERT_NE(event, nullptr);
    EXPECT_EQ(event->type, "Warning");
    ASSERT_TRUE(plan.status.has_value());
    EXPECT_EQ((*plan.status)["phase"], "Restarting");
    const json restarting = ConditionOf(*plan.status, "Restarting");
    EXPECT_EQ(restarting["status"], "True");
    EXPECT_EQ(restarting["reason"], "TrainingJobRestarting");
    EXPECT_EQ(restarting["message"], event->note);
    EXPECT_EQ(ConditionOf(*plan.status, "Running")["status"], "False");
    EXPECT_TRUE(HasReason(plan, "TrainingJobRestarting"));

    c.Settle();
    if (tc.terminating) {  // it goes once its grace period is over
      EXPECT_EQ(UidOf(*c.Pod(tc.pod)), old_uid);
      c.pods().erase(std::remove_if(c.pods().begin(), c.pods().end(),
                                    [&](const json& p) { return UidOf(p) == old_uid; }),
                     c.pods().end());
      c.Settle();
    }
    EXPECT_NE(UidOf(*c.Pod(tc.pod)), old_uid);
    EXPECT_EQ(c.status()["phase"], "Restarting");  // until it is ready again
    EXPECT_EQ(ConditionOf(c.status(), "Restarting")["message"], event->note);
    ExpectQuietLater(&c);

    c.RunAll();
    c.coordinator = CoordinatorIn("Running");
    const ReconcilePlan ready = c.Plan();
    ASSERT_TRUE(ready.status.has_value());
    EXPECT_EQ((*ready.status)["phase"], "Running");
    EXPECT_EQ(ConditionOf(*ready.status, "Restarting")["status"], "False");
    EXPECT_EQ(ConditionOf(*ready.status, "Running")["status"], "True");
    EXPECT_EQ((*ready.status)["restarts"], 1);
    c.Settle();
    ExpectQuietLater(&c);
  }
}

json ShardedJob() {
  json job = BaseJob();
  job["spec"]["master"] = {{"shards", 2}};
  return job;
}

// spec.master.shards: 2 plans two masters, each a pod, a Service and a
// claim of its own, and a coordinator that dials both in shard order.
TEST(ReconcileTest, TwoMasterShardsArePlannedAsTwoMasters) {
  Cluster c(ShardedJob());
  const ReconcilePlan plan = c.Plan();
  std::vector<std::string> created;
  for (const ChildApply& a : plan.applies) created.push_back(ChildKey(a.resource, NameOf(a.object)));
  EXPECT_EQ(created,
            (std::vector<std::string>{
                "ConfigMap/mnist-job", "PersistentVolumeClaim/mnist-checkpoints-0",
                "PersistentVolumeClaim/mnist-checkpoints-1",
                "PersistentVolumeClaim/mnist-coordinator-state", "Service/mnist-master-0",
                "Service/mnist-master-1", "Service/mnist-coordinator",
                "NetworkPolicy/mnist-ingress", "Secret/mnist-token", "Pod/mnist-master-0",
                "Pod/mnist-master-1", "Pod/mnist-coordinator", "Pod/mnist-evaluator",
                "Pod/mnist-trainer-0", "Pod/mnist-trainer-1"}));
  c.Carry(plan);
  const json& coordinator = (*c.Pod("mnist-coordinator"))["spec"]["containers"][0]["command"];
  const auto flag = std::find(coordinator.begin(), coordinator.end(), "--master");
  ASSERT_NE(flag, coordinator.end());
  EXPECT_EQ(*std::next(flag), "mnist-master-0.default.svc:7070,mnist-master-1.default.svc:7070");
  for (const char* shard : {"0", "1"}) {
    const json& command =
        (*c.Pod(std::string("mnist-master-") + shard))["spec"]["containers"][0]["command"];
    EXPECT_EQ(command[command.size() - 2], "--shard");
    EXPECT_EQ(command.back(), shard);
  }
  c.Settle();
  ExpectQuietLater(&c);

  // Running only once both shards are ready; replicaStatuses counts both.
  c.RunAll();
  c.SetPodStatus("mnist-master-1", json::parse(R"j({"phase": "Running"})j"));  // not ready
  c.coordinator = CoordinatorIn("Running");
  c.Settle();
  EXPECT_EQ(c.status()["phase"], "Pending");
  EXPECT_EQ(c.status()["replicaStatuses"]["Master"],
            json::parse(R"j({"active": 2, "ready": 1, "succeeded": 0, "failed": 0})j"));
  c.RunAll();
  c.Settle();
  EXPECT_EQ(c.status()["phase"], "Running");
  EXPECT_EQ(c.status()["replicaStatuses"]["Master"],
            json::parse(R"j({"active": 2, "ready": 2, "succeeded": 0, "failed": 0})j"));
  ExpectQuietLater(&c);
}

// A shard's pod lost (SIGKILLed: exit 137) is counted as the master's is,
// recreated under its own name, and the job is Restarting until it is
// ready again; the other shard is left alone.
TEST(ReconcileTest, ALostMasterShardIsRecreatedAndTheOtherKept) {
  Cluster c = RunningCluster(ShardedJob());
  const std::string kept = UidOf(*c.Pod("mnist-master-0"));
  const std::string lost = UidOf(*c.Pod("mnist-master-1"));
  c.SetPodStatus("mnist-master-1", FailedWith(137));
  const ReconcilePlan plan = c.Plan();
  ASSERT_TRUE(plan.ledger.has_value());
  EXPECT_EQ(plan.ledger->restarts, 1u);
  const PlannedEvent* event = EventWith(plan, "MasterRestarting");
  ASSERT_NE(event, nullptr);
  EXPECT_NE(event->note.find("the master mnist-master-1 failed"), std::string::npos)
      << event->note;
  ASSERT_EQ(plan.deletes.size(), 1u);
  EXPECT_EQ(plan.deletes[0].name, "mnist-master-1");
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["phase"], "Restarting");
  c.Settle();
  ASSERT_NE(c.Pod("mnist-master-1"), nullptr);
  EXPECT_NE(UidOf(*c.Pod("mnist-master-1")), lost);
  EXPECT_EQ(UidOf(*c.Pod("mnist-master-0")), kept);
  EXPECT_EQ(c.status()["phase"], "Restarting");
  EXPECT_EQ(c.status()["restarts"], 1);
  ExpectQuietLater(&c);
  c.RunAll();
  c.Settle();
  EXPECT_EQ(c.status()["phase"], "Running");
  EXPECT_EQ(c.status()["restarts"], 1);
}

TEST(ReconcileTest, AMasterNotReadyAfterTheJobRanIsRestarting) {
  Cluster c = RunningCluster();
  c.pods().erase(c.pods().begin());  // the master, gone without a trace
  const ReconcilePlan plan = c.Plan();
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["phase"], "Restarting");
  EXPECT_EQ(ConditionOf(*plan.status, "Restarting")["message"],
            "waiting for the master and the coordinator to be ready again");
  ASSERT_EQ(plan.applies.size(), 2u);
  EXPECT_EQ(NameOf(plan.applies[0].object), "mnist-token");
  EXPECT_EQ(NameOf(plan.applies[1].object), "mnist-master");
  EXPECT_FALSE(plan.ledger.has_value());  // not seen lost: not counted (pod_ledger.h)
}

// --- scaling ------------------------------------------------------------------

TEST(ReconcileTest, ScalesUpAndDownByTheHighestIndices) {
  json job = BaseJob();
  job["spec"]["workers"]["replicas"] = 2;
  job["spec"]["workers"]["maxReplicas"] = 4;
  job["spec"]["workers"]["minReplicas"] = 1;
  Cluster c = RunningCluster(job);

  c.job()["spec"]["workers"]["replicas"] = 4;
  c.job()["metadata"]["generation"] = 2;
  const ReconcilePlan up = c.Plan();
  std::vector<std::string> applied;
  for (const ChildApply& a : up.applies) applied.push_back(ChildKey(a.resource, NameOf(a.object)));
  EXPECT_EQ(applied, (std::vector<std::string>{"ConfigMap/mnist-job", "Secret/mnist-token",
                                               "Pod/mnist-trainer-2", "Pod/mnist-trainer-3"}));
  EXPECT_FALSE(up.applies[0].creates);  // job.yaml follows the spec
  EXPECT_TRUE(HasReason(up, "TrainingJobScaled"));
  EXPECT_TRUE(HasReason(up, "SuccessfulUpdateConfigMap"));
  EXPECT_EQ((*up.status)["workers"]["desired"], 4);
  EXPECT_EQ((*up.status)["observedGeneration"], 2);
  c.Settle();
  c.RunAll();
  c.Settle();
  EXPECT_EQ(c.status()["workers"]["summary"], "4/4");

  c.job()["spec"]["workers"]["replicas"] = 1;
  const ReconcilePlan down = c.Plan();
  std::set<std::string> deleted;
  for (const ChildDelete& d : down.deletes) {
    deleted.insert(d.name);
    EXPECT_FALSE(d.grace_period_seconds.has_value()) << d.name;  // graceful: the worker leaves
  }
  EXPECT_EQ(deleted, (std::set<std::string>{"mnist-trainer-1", "mnist-trainer-2",
                                            "mnist-trainer-3"}));
  ASSERT_TRUE(down.ledger.has_value());
  EXPECT_EQ(down.ledger->released.size(), 3u);
  EXPECT_EQ(down.ledger->preemptions, 0u);

  // They terminate (SIGTERM, exit 0) before going: not preemptions, even
  // when the job scales up again meanwhile.
  c.Carry([&] {
    ReconcilePlan p = down;
    p.deletes.clear();
    return p;
  }());
  for (const char* name : {"mnist-trainer-1", "mnist-trainer-2", "mnist-trainer-3"}) {
    c.Terminate(name);
    c.SetPodStatus(name, json::parse(R"j({"phase": "Succeeded"})j"));
  }
  c.job()["spec"]["workers"]["replicas"] = 3;
  const ReconcilePlan back = c.Plan();
  EXPECT_FALSE(back.ledger.has_value());
  EXPECT_TRUE(back.deletes.empty());
  for (const ChildApply& a : back.applies) EXPECT_EQ(a.resource.kind, "ConfigMap");
  c.Carry(back);
  auto& pods = c.pods();
  pods.erase(std::remove_if(pods.begin(), pods.end(), [](const json& p) { return IsTerminating(p); }),
             pods.end());
  c.Settle();
  EXPECT_EQ(c.status()["preemptions"], 0);
  EXPECT_NE(c.Pod("mnist-trainer-2"), nullptr);
  EXPECT_EQ(c.Pod("mnist-trainer-3"), nullptr);
}

// --- Gap-aware autoscaling ----------------------------------------------------

json AutoscaledJob() {
  json job = BaseJob();
  job["spec"]["workers"] = json::parse(R"j({"replicas": 2, "minReplicas": 1, "maxReplicas": 8,
      "autoscale": {"enabled": true, "maxGap": 1.5, "intervalSeconds": 60}})j");
  return job;
}

// The master read at the cluster's time: `updates` more than before, each
// push of Gap `gap`.
void MasterPushes(Cluster* c, double updates, double gap) {
  MasterScrape m = c->master_scrape.value_or(MasterScrape());
  m.at = c->now;
  m.model_version += updates;
  m.gap_sum += gap * updates;
  m.gap_count += updates;
  c->master_scrape = m;
}

std::vector<std::string> TrainerNames(Cluster* c) {
  std::vector<std::string> names;
  for (const json& p : c->pods()) {
    if (StringAt(p, {"metadata", "labels", kReplicaTypeLabel}) == "trainer") {
      names.push_back(NameOf(p));
    }
  }
  return names;
}

// Running, the master read: the window begins; an interval later, a low Gap
// grows the job through the scale subresource, with an Event once that is
// written; the next reconcile scales the pods as for `kubectl scale`.
TEST(ReconcileTest, AutoscalingGrowsThroughTheScaleSubresourceOncePerInterval) {
  Cluster c = RunningCluster(AutoscaledJob());
  EXPECT_FALSE(c.status().contains("autoscale"));  // nothing read yet
  MasterPushes(&c, 1000, 1.1);
  ReconcilePlan plan = c.Plan();
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["autoscale"]["window"]["startTime"], "2026-11-23T06:00:00.000000Z");
  EXPECT_FALSE(plan.scale_to.has_value());
  EXPECT_EQ(plan.requeue_after, seconds(15));  // polling comes first
  c.Carry(plan);

  // Before the interval has passed: nothing to write, a look at its end.
  c.now += seconds(50);
  MasterPushes(&c, 5000, 1.1);
  plan = c.Plan();
  EXPECT_TRUE(plan.WritesNothing());
  EXPECT_EQ(plan.requeue_after, seconds(10));

  c.now += seconds(10);
  MasterPushes(&c, 1000, 1.1);
  plan = c.Plan();
  ASSERT_EQ(plan.scale_to, 4u);
  const PlannedEvent* up = EventWith(plan, "ScaledUp");
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->type, "Normal");
  EXPECT_EQ(up->after, PlannedEvent::After::kScale);
  EXPECT_EQ(up->note,
            "Gap 1.10 leaves room under maxGap 1.50 (projected 1.30 at 4) at 100.0 updates/s: "
            "2 -> 4 trainers");
  const json& last = (*plan.status)["autoscale"]["lastDecision"];
  EXPECT_EQ(last["reason"], "ScaledUp");
  EXPECT_EQ(last["replicas"], 4);
  EXPECT_EQ(last["message"], up->note);
  EXPECT_EQ(last["observedGeneration"], 1);
  EXPECT_EQ((*plan.status)["autoscale"]["window"]["startTime"], "2026-11-23T06:01:00.000000Z");
  EXPECT_TRUE(plan.applies.empty());  // the pods follow the spec, next time
  c.Carry(plan);

  plan = c.Plan();
  std::vector<std::string> created;
  for (const ChildApply& a : plan.applies) created.push_back(NameOf(a.object));
  EXPECT_EQ(created, (std::vector<std::string>{"mnist-job", "mnist-token", "mnist-trainer-2",
                                               "mnist-trainer-3"}));
  EXPECT_EQ(EventWith(plan, "TrainingJobScaled")->note, "trainers: 2 -> 4");
  EXPECT_FALSE(plan.scale_to.has_value());
  EXPECT_FALSE(HasReason(plan, "ScaledUp"));
  c.Settle();
  EXPECT_EQ(TrainerNames(&c).size(), 4u);
}

// Holding decisions are in status.autoscale.lastDecision only: no Event,
// no scale. The new trainers Pending, then a trainer preempted and
// replaced within the window (seen down at a reconcile), hold the job.
TEST(ReconcileTest, AutoscalingHoldsWhileTrainersArePendingOrPreempted) {
  json job = AutoscaledJob();
  job["spec"]["workers"]["replicas"] = 4;
  Cluster c = RunningCluster(job);
  MasterPushes(&c, 1000, 1.1);
  c.Settle();
  c.SetPodStatus("mnist-trainer-3", json::parse(R"j({"phase": "Pending"})j"));
  c.now += seconds(60);
  MasterPushes(&c, 6000, 1.1);
  ReconcilePlan plan = c.Plan();
  EXPECT_FALSE(plan.scale_to.has_value());
  EXPECT_TRUE(plan.events.empty());
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["autoscale"]["lastDecision"]["reason"], "Holding");
  EXPECT_EQ((*plan.status)["autoscale"]["lastDecision"]["message"],
            "1 of 4 trainers not running (Pending or being replaced): holding at 4 trainers");
  c.Carry(plan);

  // Running again; trainer 0 preempted and replaced within the window.
  c.RunAll();
  c.SetPodStatus("mnist-trainer-0", json::parse(R"j({"phase": "Failed", "reason": "Evicted"})j"));
  c.Settle();
  c.RunAll();
  EXPECT_EQ(c.status()["preemptions"], 1);
  c.now += seconds(60);
  MasterPushes(&c, 6000, 1.1);
  plan = c.Plan();
  EXPECT_FALSE(plan.scale_to.has_value());
  EXPECT_FALSE(HasReason(plan, "ScaledUp"));
  // The window saw it down (fewestTrainers), before it counted the loss.
  EXPECT_EQ((*plan.status)["autoscale"]["window"]["fewestTrainers"], 4) << "a new window";
  EXPECT_EQ((*plan.status)["autoscale"]["lastDecision"]["message"],
            "1 of 4 trainers not running (Pending or being replaced): holding at 4 trainers");
  EXPECT_EQ((*plan.status)["phase"], "Running");
}

// Above maxGap the job shrinks; the highest trainers go, gracefully.
TEST(ReconcileTest, AutoscalingShrinksAboveMaxGap) {
  json job = AutoscaledJob();
  job["spec"]["workers"]["replicas"] = 4;
  Cluster c = RunningCluster(job);
  MasterPushes(&c, 1000, 1.8);
  c.Settle();
  c.now += seconds(60);
  MasterPushes(&c, 6000, 1.8);
  ReconcilePlan plan = c.Plan();
  ASSERT_EQ(plan.scale_to, 2u);
  EXPECT_EQ(EventWith(plan, "ScaledDown")->note,
            "Gap 1.80 is above maxGap 1.50 (projected 1.27 at 2): 4 -> 2 trainers");
  EXPECT_EQ(EventWith(plan, "ScaledDown")->after, PlannedEvent::After::kScale);
  c.Carry(plan);
  plan = c.Plan();
  std::set<std::string> deleted;
  for (const ChildDelete& d : plan.deletes) {
    deleted.insert(d.name);
    EXPECT_FALSE(d.grace_period_seconds.has_value());
  }
  EXPECT_EQ(deleted, (std::set<std::string>{"mnist-trainer-2", "mnist-trainer-3"}));
}

// No read of the master, a job not Running, or autoscale off: no decision.
// A restarted master begins a new window. The state is the status's alone:
// the same observation plans the same, whoever reconciles.
TEST(ReconcileTest, AutoscalingDecidesOnlyFromAReadOfARunningJob) {
  Cluster c = RunningCluster(AutoscaledJob());
  MasterPushes(&c, 1000, 1.1);
  c.Settle();
  const json window = c.status()["autoscale"]["window"];

  c.now += seconds(120);
  c.master_scrape.reset();  // unreachable
  ReconcilePlan plan = c.Plan();
  EXPECT_TRUE(plan.WritesNothing());
  EXPECT_EQ(plan.requeue_after, seconds(15));

  // The master restarted: its totals went down.
  MasterScrape restarted;
  restarted.at = c.now;
  restarted.model_version = 900;
  restarted.gap_sum = 11;
  restarted.gap_count = 10;
  c.master_scrape = restarted;
  plan = c.Plan();
  EXPECT_FALSE(plan.scale_to.has_value());
  EXPECT_FALSE((*plan.status)["autoscale"].contains("lastDecision"));
  EXPECT_NE((*plan.status)["autoscale"]["window"], window);
  EXPECT_EQ(c.Plan().status, plan.status);  // pure: the same again
  c.Carry(plan);

  // The master's pod lost: Restarting, the window dropped.
  c.now += seconds(120);
  MasterPushes(&c, 12000, 1.1);
  c.SetPodStatus("mnist-master", json::parse(R"j({"phase": "Failed", "reason": "Evicted"})j"));
  plan = c.Plan();
  EXPECT_EQ((*plan.status)["phase"], "Restarting");
  EXPECT_FALSE(plan.scale_to.has_value());
  EXPECT_FALSE((*plan.status).contains("autoscale"));

  // Autoscale off: nothing is measured.
  Cluster off = RunningCluster();
  MasterPushes(&off, 1000, 1.1);
  EXPECT_TRUE(off.Plan().WritesNothing());
  ExpectQuietLater(&off);
}

// The scale write failed after the status recorded a growth: a later
// reconcile carries it out, once, and not after the spec changed.
TEST(ReconcileTest, AutoscalingCarriesOutARecordedDecisionOnce) {
  Cluster c = RunningCluster(AutoscaledJob());
  MasterPushes(&c, 1000, 1.1);
  c.Settle();
  c.now += seconds(60);
  MasterPushes(&c, 6000, 1.1);
  ReconcilePlan grow = c.Plan();
  ASSERT_EQ(grow.scale_to, 4u);
  grow.scale_to.reset();  // the status written, not the scale
  c.Carry(grow);

  c.now += seconds(5);
  ReconcilePlan again = c.Plan();
  EXPECT_EQ(again.scale_to, 4u);
  EXPECT_FALSE(again.status.has_value());
  ASSERT_NE(EventWith(again, "ScaledUp"), nullptr);
  EXPECT_EQ(EventWith(again, "ScaledUp")->after, PlannedEvent::After::kScale);
  c.Carry(again);
  EXPECT_EQ(c.job()["spec"]["workers"]["replicas"], 4);
  ReconcilePlan after = c.Plan();
  EXPECT_FALSE(after.scale_to.has_value());
  EXPECT_FALSE(HasReason(after, "ScaledUp"));
}

// --- waiting for nodes --------------------------------------------------------

// kube-scheduler v1.26's words for a pod that needs a spot node the cluster
// lacks, and for one whose claim is not bound.
constexpr char kNoSpotNode[] =
    "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. "
    "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling..";
constexpr char kUnboundClaim[] =
    "0/1 nodes are available: 1 pod has unbound immediate PersistentVolumeClaims. "
    "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling..";

void MarkUnschedulable(Cluster* c, const std::string& pod, const char* message) {
  c->SetPodStatus(pod, {{"phase", "Pending"},
                        {"conditions",
                         {{{"type", "PodScheduled"},
                           {"status", "False"},
                           {"reason", "Unschedulable"},
                           {"message", message}}}}});
}

// Pods the scheduler cannot place make PodsUnschedulable True with how
// many wait and the scheduler's own words, grouped by them; a Warning
// FailedScheduling once as it becomes True; the message follows the count;
// False once every pod is placed.
TEST(ReconcileTest, PodsTheSchedulerCannotPlaceSayWhy) {
  Cluster c(BaseJob());
  c.Settle();
  for (const char* pod : {"mnist-evaluator", "mnist-trainer-0", "mnist-trainer-1"}) {
    MarkUnschedulable(&c, pod, kNoSpotNode);
  }
  for (const char* pod : {"mnist-master", "mnist-coordinator"}) {
    MarkUnschedulable(&c, pod, kUnboundClaim);
  }
  const ReconcilePlan plan = c.Plan();
  ASSERT_TRUE(plan.status.has_value());
  const std::string both = std::string("5 pods cannot be scheduled: 2 (mnist-coordinator, "
                                       "mnist-master): ") + kUnboundClaim +
                           "; 3 (mnist-evaluator, mnist-trainer-0, mnist-trainer-1): " +
                           kNoSpotNode;
  const json condition = ConditionOf(*plan.status, "PodsUnschedulable");
  EXPECT_EQ(condition["status"], "True");
  EXPECT_EQ(condition["reason"], "Unschedulable");
  EXPECT_EQ(condition["message"], both);
  EXPECT_EQ((*plan.status)["phase"], "Pending");
  const PlannedEvent* event = EventWith(plan, "FailedScheduling");
  ASSERT_NE(event, nullptr);
  EXPECT_EQ(event->type, "Warning");
  EXPECT_EQ(event->note, both);
  EXPECT_EQ(event->after, PlannedEvent::After::kStatus);
  c.Carry(plan);
  ExpectQuietLater(&c);

  // The claims bound, the master and the coordinator placed: one reason
  // left, no second Event.
  for (const char* pod : {"mnist-master", "mnist-coordinator"}) {
    (*c.Pod(pod))["spec"]["nodeName"] = "node-a";
    c.SetPodStatus(pod, json::parse(R"j({"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "True"}]})j"));
  }
  const ReconcilePlan fewer = c.Plan();
  ASSERT_TRUE(fewer.status.has_value());
  EXPECT_EQ(ConditionOf(*fewer.status, "PodsUnschedulable")["message"],
            std::string("3 pods cannot be scheduled (mnist-evaluator, mnist-trainer-0, "
                        "mnist-trainer-1): ") + kNoSpotNode);
  EXPECT_FALSE(HasReason(fewer, "FailedScheduling"));
  c.Carry(fewer);

  // A spot node: everything placed and running.
  c.RunAll();
  c.coordinator = CoordinatorIn("Running");
  c.Settle();
  EXPECT_EQ(c.status()["phase"], "Running");
  const json cleared = ConditionOf(c.status(), "PodsUnschedulable");
  EXPECT_EQ(cleared["status"], "False");
  EXPECT_EQ(cleared["reason"], "PodsScheduled");
  ExpectQuietLater(&c);
}

// spec.runPolicy.scheduleTimeoutSeconds (gang_release.h): a job whose
// trainers are placed but never all ready (another job holds the rest of
// the pool) gives their pods back after the timeout, counting neither a
// preemption nor a failure, says so (a Warning Event, status.gang), makes
// none during its backoff and all of them after it.
TEST(ReconcileTest, AJobWaitingTooLongForItsTrainersGivesTheirNodesBack) {
  json job = BaseJob();
  job["spec"]["runPolicy"] = {{"scheduleTimeoutSeconds", 60}};
  Cluster c(job);
  c.Settle();
  (*c.Pod("mnist-trainer-0"))["spec"]["nodeName"] = "node-a";  // holds its node
  c.SetPodStatus("mnist-trainer-0", json::parse(R"j({"phase": "Pending", "conditions": [
      {"type": "PodScheduled", "status": "True"}]})j"));
  MarkUnschedulable(&c, "mnist-trainer-1", kNoSpotNode);
  c.Settle();
  EXPECT_EQ(c.status()["gang"]["waitingSince"], "2026-11-23T06:00:00Z");
  c.now = kStart + seconds(59);
  EXPECT_EQ(c.Plan().requeue_after, seconds(1));
  EXPECT_TRUE(c.Plan().deletes.empty());

  c.now = kStart + seconds(60);
  const ReconcilePlan release = c.Plan();
  ASSERT_EQ(release.deletes.size(), 2u);
  for (const ChildDelete& d : release.deletes) {
    EXPECT_EQ(d.name.rfind("mnist-trainer-", 0), 0u) << d.name;
    EXPECT_EQ(d.grace_period_seconds, std::nullopt) << d.name;  // gracefully: the trainer hands its task back
  }
  const PlannedEvent* event = EventWith(release, "TrainersReleased");
  ASSERT_NE(event, nullptr);
  EXPECT_EQ(event->type, "Warning");
  const int64_t backoff = static_cast<int64_t>(60 * (1 + JitterOf("job-uid") / 2));
  EXPECT_EQ(event->note, "0 of at least 2 trainers ready after 60 s (scheduleTimeoutSeconds): "
                         "their nodes are given back for " + std::to_string(backoff) + " s");
  ASSERT_TRUE(release.status.has_value());
  EXPECT_EQ((*release.status)["gang"],
            json::parse(R"j({"releasedAt": "2026-11-23T06:01:00Z", "releases": 1})j"));
  // No trainer is ready, the master and coordinator are not: nothing to
  // poll, the release's end wakes it.
  EXPECT_EQ(release.requeue_after, seconds(backoff));
  c.Carry(release);

  // Backing off: the master, coordinator and evaluator stay, no trainer is made.
  c.now = kStart + seconds(61);
  const ReconcilePlan held = c.Plan();
  for (const ChildApply& a : held.applies) {
    EXPECT_EQ(NameOf(a.object).rfind("mnist-trainer-", 0), std::string::npos) << NameOf(a.object);
  }
  c.Carry(held);
  EXPECT_EQ(c.status()["preemptions"], 0);
  EXPECT_EQ(c.status()["failures"], 0);
  EXPECT_EQ(c.Pod("mnist-trainer-0"), nullptr);
  EXPECT_NE(c.Pod("mnist-master"), nullptr);

  // After it: both made again, waiting anew.
  c.now = kStart + seconds(60 + backoff);
  c.Settle();
  EXPECT_NE(c.Pod("mnist-trainer-0"), nullptr);
  EXPECT_NE(c.Pod("mnist-trainer-1"), nullptr);
  EXPECT_EQ(c.status()["gang"]["releases"], 1);
  EXPECT_TRUE(c.status()["gang"].contains("waitingSince"));
}

// Many trainers waiting for one reason read as one short sentence; a
// running job's replacement that waits says so too; suspending clears it.
TEST(ReconcileTest, ManyWaitingPodsAreCountedAndNamedShort) {
  json job = BaseJob();
  job["spec"]["workers"]["replicas"] = 6;
  Cluster c = RunningCluster(job);
  // Trainers replaced after a spot reclaim find no spot node left.
  for (const char* pod : {"mnist-trainer-1", "mnist-trainer-2", "mnist-trainer-3",
                          "mnist-trainer-5"}) {
    MarkUnschedulable(&c, pod, kNoSpotNode);
  }
  const ReconcilePlan plan = c.Plan();
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["phase"], "Running");
  EXPECT_EQ(ConditionOf(*plan.status, "PodsUnschedulable")["message"],
            std::string("4 pods cannot be scheduled (mnist-trainer-1, mnist-trainer-2, "
                        "mnist-trainer-3 and 1 more): ") + kNoSpotNode);
  EXPECT_TRUE(HasReason(plan, "FailedScheduling"));
  c.Carry(plan);
  // One more trainer waits, for a reason the condition did not hold: an
  // Event again.
  const char* kNoRoom = "0/1 nodes are available: 1 Insufficient cpu.";
  MarkUnschedulable(&c, "mnist-trainer-4", kNoRoom);
  const ReconcilePlan another = c.Plan();
  const PlannedEvent* event = EventWith(another, "FailedScheduling");
  ASSERT_NE(event, nullptr);
  EXPECT_EQ(event->note, std::string("5 pods cannot be scheduled: 4 (mnist-trainer-1, "
                                     "mnist-trainer-2, mnist-trainer-3 and 1 more): ") +
                             kNoSpotNode + "; 1 (mnist-trainer-4): " + kNoRoom);
  c.Carry(another);
  c.job()["spec"]["runPolicy"] = {{"suspend", true}};
  const ReconcilePlan suspend = c.Plan();
  ASSERT_TRUE(suspend.status.has_value());
  EXPECT_EQ(ConditionOf(*suspend.status, "PodsUnschedulable")["status"], "False");
}

// --- data unavailable ---------------------------------------------------------

// A trainer whose store is away hands its task back and the coordinator's
// /status says so (its own document, parsed): DataUnavailable True with
// the trainer's words and a Warning Event once per episode, not per
// reconcile nor per release; False with a Normal DataAvailable Event once
// the coordinator no longer reports it; a later episode warns again.
TEST(ReconcileTest, ATrainersStoreThatIsAwayIsAConditionAndOneEventPerEpisode) {
  Cluster c = RunningCluster();
  EXPECT_TRUE(ConditionOf(c.status(), "DataUnavailable").is_null());
  CoordinatorStatus away;
  ASSERT_TRUE(
      ParseCoordinatorStatus(coordinator_status_examples::kDataUnavailable, &away).ok());
  c.coordinator = away;
  const ReconcilePlan plan = c.Plan();
  ASSERT_TRUE(plan.status.has_value());
  const std::string message =
      "trainer mnist-trainer-0 (worker 2) cannot reach its data: ConnectionRefusedError: "
      "[Errno 111] store:9000 refused the connection (2 tasks handed back since "
      "2026-11-23T06:05:00Z)";
  const json condition = ConditionOf(*plan.status, "DataUnavailable");
  EXPECT_EQ(condition["status"], "True");
  EXPECT_EQ(condition["reason"], "StoreUnreachable");
  EXPECT_EQ(condition["message"], message);
  EXPECT_EQ((*plan.status)["phase"], "Running");  // the job goes on
  const PlannedEvent* event = EventWith(plan, "DataUnavailable");
  ASSERT_NE(event, nullptr);
  EXPECT_EQ(event->type, "Warning");
  EXPECT_EQ(event->note, message);
  EXPECT_EQ(event->after, PlannedEvent::After::kStatus);
  c.Carry(plan);
  ExpectQuietLater(&c);
  EXPECT_TRUE(c.Plan().events.empty());

  // Another release: the message follows, no second Event.
  away.data_unavailable->releases = 3;
  c.coordinator = away;
  const ReconcilePlan more = c.Plan();
  ASSERT_TRUE(more.status.has_value());
  EXPECT_NE(ConditionOf(*more.status, "DataUnavailable")["message"].get<std::string>().find(
                "(3 tasks handed back"),
            std::string::npos);
  EXPECT_FALSE(HasReason(more, "DataUnavailable"));
  c.Carry(more);

  // The coordinator unreachable for a while: nothing changes.
  c.coordinator.reset();
  EXPECT_TRUE(c.Plan().WritesNothing());
  EXPECT_TRUE(c.Plan().events.empty());

  // A task completed: the store is back.
  c.coordinator = CoordinatorIn("Running");
  const ReconcilePlan back = c.Plan();
  ASSERT_TRUE(back.status.has_value());
  const json cleared = ConditionOf(*back.status, "DataUnavailable");
  EXPECT_EQ(cleared["status"], "False");
  EXPECT_EQ(cleared["reason"], "DataAvailable");
  EXPECT_EQ(cleared["message"], "the trainers read their data again");
  const PlannedEvent* available = EventWith(back, "DataAvailable");
  ASSERT_NE(available, nullptr);
  EXPECT_EQ(available->type, "Normal");
  EXPECT_FALSE(HasReason(back, "DataUnavailable"));
  c.Carry(back);
  ExpectQuietLater(&c);
  EXPECT_TRUE(c.Plan().events.empty());

  // Away again later: a new episode, a new Warning.
  c.coordinator = away;
  const ReconcilePlan again = c.Plan();
  EXPECT_TRUE(HasReason(again, "DataUnavailable"));
  c.Carry(again);
  EXPECT_EQ(ConditionOf(c.status(), "DataUnavailable")["status"], "True");
  ExpectQuietLater(&c);
}

// --- suspend and resume -------------------------------------------------------

TEST(ReconcileTest, SuspendDeletesPodsKeepsVolumesAndResumeStartsAgain) {
  Cluster c = RunningCluster();
  c.job()["spec"]["runPolicy"] = {{"suspend", true}};
  const ReconcilePlan suspend = c.Plan();
  EXPECT_EQ(suspend.deletes.size(), 5u);
  for (const ChildDelete& d : suspend.deletes) EXPECT_EQ(d.resource.kind, "Pod");
  ASSERT_EQ(suspend.applies.size(), 1u);  // job.yaml follows the spec
  EXPECT_EQ(suspend.applies[0].resource.kind, "ConfigMap");
  ASSERT_TRUE(suspend.status.has_value());
  EXPECT_EQ((*suspend.status)["phase"], "Suspended");
  EXPECT_EQ(ConditionOf(*suspend.status, "Suspended")["reason"], "TrainingJobSuspended");
  EXPECT_EQ(ConditionOf(*suspend.status, "Running")["status"], "False");
  EXPECT_FALSE(suspend.status->contains("startTime"));
  EXPECT_TRUE(HasReason(suspend, "TrainingJobSuspended"));
  EXPECT_EQ(suspend.requeue_after, std::nullopt);
  c.coordinator.reset();
  c.Settle();
  EXPECT_EQ(c.Count("Pod"), 0u);
  EXPECT_EQ(c.Count("PersistentVolumeClaim"), 2u);
  EXPECT_EQ(c.status()["preemptions"], 0);
  ExpectQuietLater(&c);

  c.job()["spec"]["runPolicy"] = {{"suspend", false}};
  c.now += seconds(600);
  const ReconcilePlan resume = c.Plan();
  size_t pods = 0;
  for (const ChildApply& a : resume.applies) pods += a.resource.kind == "Pod";
  EXPECT_EQ(pods, 5u);
  ASSERT_TRUE(resume.status.has_value());
  EXPECT_EQ(ConditionOf(*resume.status, "Suspended")["status"], "False");
  EXPECT_EQ(ConditionOf(*resume.status, "Suspended")["reason"], "TrainingJobResumed");
  EXPECT_EQ((*resume.status)["startTime"], "2026-11-23T06:11:37Z");
  EXPECT_TRUE(HasReason(resume, "TrainingJobResumed"));
  c.Settle();
  c.RunAll();
  c.coordinator = CoordinatorIn("Running");
  c.Settle();
  EXPECT_EQ(c.status()["phase"], "Running");
  ExpectQuietLater(&c);
}

// --- deadline, completion, TTL ----------------------------------------------

TEST(ReconcileTest, ActiveDeadlineSeconds) {
  json job = BaseJob();
  job["spec"]["runPolicy"] = {{"activeDeadlineSeconds", 60}};
  Cluster c = RunningCluster(job);
  c.now = kStart + seconds(20);
  EXPECT_EQ(c.Plan().requeue_after, seconds(15));
  c.now = kStart + seconds(50);
  EXPECT_EQ(c.Plan().requeue_after, seconds(10));  // the deadline comes first
  c.now = kStart + seconds(60);
  const ReconcilePlan plan = c.Plan();
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["phase"], "Failed");
  EXPECT_EQ(ConditionOf(*plan.status, "Failed")["reason"], "DeadlineExceeded");
  EXPECT_EQ((*plan.status)["completionTime"], "2026-11-23T06:01:00Z");
  EXPECT_EQ(plan.deletes.size(), 5u);  // cleanPodPolicy Running
  EXPECT_EQ(plan.requeue_after, std::nullopt);  // no TTL: nothing to wait for
}

TEST(ReconcileTest, CompletionWithEachCleanPodPolicy) {
  struct Case {
    const char* policy;
    size_t deleted;
  } cases[] = {{"All", 5}, {"Running", 4}, {"None", 0}};
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.policy);
    json job = BaseJob();
    job["spec"]["runPolicy"] = {{"cleanPodPolicy", tc.policy}};
    Cluster c = RunningCluster(job);
    // Trainer 0 finished; the others still run.
    c.SetPodStatus("mnist-trainer-0", json::parse(R"j({"phase": "Succeeded"})j"));
    c.coordinator = CoordinatorIn("Succeeded");
    const ReconcilePlan plan = c.Plan();
    ASSERT_TRUE(plan.status.has_value());
    EXPECT_EQ((*plan.status)["phase"], "Succeeded");
    const json succeeded = ConditionOf(*plan.status, "Succeeded");
    EXPECT_EQ(succeeded["reason"], "TrainingJobSucceeded");
    EXPECT_EQ(succeeded["message"], "EpochsDone: 4 epochs done");
    EXPECT_EQ(ConditionOf(*plan.status, "Running")["reason"], "TrainingJobSucceeded");
    EXPECT_EQ(plan.deletes.size(), tc.deleted);
    EXPECT_FALSE(plan.ledger.has_value());  // trainer 0 completed: no preemption
    EXPECT_EQ(EventWith(plan, "TrainingJobSucceeded")->type, "Normal");
    EXPECT_EQ(plan.requeue_after, std::nullopt);
    EXPECT_FALSE(plan.status->contains("output"));  // no spec.output: no export
    c.Settle();
    c.coordinator.reset();
    EXPECT_EQ(c.status()["phase"], "Succeeded");
    EXPECT_EQ(c.status()["preemptions"], 0);
    ExpectQuietLater(&c);
  }
}

// The coordinator finishes before the evaluator has scored the final
// model; the job ends with that score, not an older one.
TEST(ReconcileTest, CompletionWaitsForTheFinalEvaluation) {
  Cluster c = RunningCluster();
  for (const char* trainer : {"mnist-trainer-0", "mnist-trainer-1"}) {
    c.SetPodStatus(trainer, json::parse(R"j({"phase": "Succeeded"})j"));
  }
  CoordinatorStatus done = CoordinatorIn("Succeeded");
  done.master_version = 1875;
  done.evaluation_version = 1500;
  done.test_accuracy = 0.95;
  done.finished_at = c.now;
  c.coordinator = done;
  c.now += seconds(1);
  ReconcilePlan plan = c.Plan();
  EXPECT_TRUE(plan.deletes.empty());
  EXPECT_TRUE(plan.applies.empty());
  EXPECT_FALSE(plan.ledger.has_value()) << "trainers that exited 0 after the end completed";
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["phase"], "Running");
  EXPECT_EQ((*plan.status)["progress"]["testAccuracy"], 0.95);
  EXPECT_EQ(plan.requeue_after, seconds(15));  // the progress poll
  c.Carry(plan);

  // The final evaluation arrives: the job ends with it.
  done.evaluation_version = 1875;
  done.test_accuracy = 0.985;
  c.coordinator = done;
  plan = c.Plan();
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["phase"], "Succeeded");
  EXPECT_EQ((*plan.status)["progress"]["testAccuracy"], 0.985);
  EXPECT_EQ(plan.deletes.size(), 3u);  // cleanPodPolicy Running: master, coordinator, evaluator

  // An evaluator still starting when the coordinator finished is waited
  // for (it joins the finished job and scores the final model); one that
  // cannot be scheduled is not.
  done.evaluation_version = 1500;
  Cluster starting = RunningCluster();
  starting.SetPodStatus("mnist-evaluator", json::parse(R"j({"phase": "Pending"})j"));
  done.finished_at = starting.now;
  starting.coordinator = done;
  EXPECT_EQ((*starting.Plan().status)["phase"], "Running");
  starting.SetPodStatus("mnist-evaluator", json::parse(R"j({"phase": "Pending",
      "conditions": [{"type": "PodScheduled", "status": "False",
                      "reason": "Unschedulable"}]})j"));
  EXPECT_EQ((*starting.Plan().status)["phase"], "Succeeded");

  // Or the evaluator stops without it; or it takes longer than 5 minutes.
  done.evaluation_version = 1500;
  Cluster stopped = RunningCluster();
  stopped.SetPodStatus("mnist-evaluator", json::parse(R"j({"phase": "Succeeded"})j"));
  done.finished_at = stopped.now;
  stopped.coordinator = done;
  EXPECT_EQ((*stopped.Plan().status)["phase"], "Succeeded");
  Cluster slow = RunningCluster();
  done.finished_at = slow.now - seconds(301);
  slow.coordinator = done;
  EXPECT_EQ((*slow.Plan().status)["phase"], "Succeeded");
  done.finished_at = slow.now - seconds(299);
  slow.coordinator = done;
  plan = slow.Plan();
  EXPECT_EQ(plan.requeue_after, seconds(1));
  EXPECT_FALSE(plan.status.has_value() && (*plan.status)["phase"] == "Succeeded");
}

TEST(ReconcileTest, TtlSecondsAfterFinishedDeletesTheJob) {
  json job = BaseJob();
  job["spec"]["runPolicy"] = {{"ttlSecondsAfterFinished", 100}};
  job["status"] = json::parse(R"j({"phase": "Succeeded", "completionTime": "2026-11-23T06:00:00Z",
      "conditions": [{"type": "Succeeded", "status": "True"}]})j");
  Cluster c(job);
  c.now = kStart + seconds(30);
  const ReconcilePlan early = c.Plan();
  EXPECT_FALSE(early.delete_job);
  EXPECT_EQ(early.requeue_after, seconds(70));
  EXPECT_TRUE(early.applies.empty());
  c.Carry(early);
  c.now = kStart + seconds(100);
  const ReconcilePlan due = c.Plan();
  EXPECT_TRUE(due.delete_job);
  EXPECT_TRUE(HasReason(due, "TrainingJobDeleted"));
  EXPECT_EQ(due.requeue_after, std::nullopt);

  // A job being deleted: nothing to do, its children go with it.
  c.job()["metadata"]["deletionTimestamp"] = "2026-11-23T06:02:00Z";
  const ReconcilePlan gone = c.Plan();
  EXPECT_TRUE(gone.WritesNothing());
  EXPECT_TRUE(gone.events.empty());
}

// Without ttlSecondsAfterFinished a finished job stays, as a Kubernetes Job
// does: its model and checkpoints with it.
TEST(ReconcileTest, AFinishedJobWithoutATtlIsKept) {
  json job = BaseJob();
  job["status"] = json::parse(R"j({"phase": "Succeeded", "completionTime": "2026-11-23T06:00:00Z",
      "conditions": [{"type": "Succeeded", "status": "True"}]})j");
  Cluster c(job);
  c.now = kStart + seconds(400 * 86400);
  const ReconcilePlan plan = c.Plan();
  EXPECT_FALSE(plan.delete_job);
  EXPECT_EQ(plan.requeue_after, std::nullopt);
  c.Carry(plan);
  ExpectQuietLater(&c);
}

// --- the model's export (spec.output) ----------------------------------------

json OutputJob(const char* clean_pod_policy = "Running") {
  json job = BaseJob();
  job["spec"]["output"] = {{"claimName", "models"}, {"path", "mnist/model.pt"}};
  job["spec"]["runPolicy"] = {{"cleanPodPolicy", clean_pod_policy}};
  return job;
}

// A running job whose coordinator has just reported Succeeded, with the
// final evaluation in.
Cluster SucceededNow(json job) {
  Cluster c = RunningCluster(std::move(job));
  CoordinatorStatus done = CoordinatorIn("Succeeded");
  done.test_accuracy = 0.9871;
  c.coordinator = done;
  return c;
}

// The export pod's end as the kubelet writes it.
json Exited(int code, const std::string& message = "") {
  json terminated = {{"exitCode", code}, {"reason", code == 0 ? "Completed" : "Error"}};
  if (!message.empty()) terminated["message"] = message;
  return {{"phase", code == 0 ? "Succeeded" : "Failed"},
          {"containerStatuses",
           {{{"name", "gaptrain"}, {"state", {{"terminated", terminated}}}}}}};
}

std::vector<std::string> Names(const std::vector<json>& objects) {
  std::vector<std::string> names;
  for (const json& o : objects) names.push_back(NameOf(o));
  return names;
}

TEST(ReconcileTest, SpecOutputExportsTheModelOnceTheMasterHasStopped) {
  Cluster c = SucceededNow(OutputJob());
  // Succeeded: cleanPodPolicy stops the master (with a final checkpoint);
  // the export waits for it.
  ReconcilePlan plan = c.Plan();
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["phase"], "Succeeded");
  EXPECT_EQ((*plan.status)["output"],
            json::parse(R"j({"claimName": "models", "path": "mnist/model.pt", "phase": "Pending",
                "message":
                  "waiting for the master mnist-master to stop with its final checkpoint"})j"));
  EXPECT_EQ(ConditionOf(*plan.status, "ModelExported")["status"], "False");
  EXPECT_EQ(ConditionOf(*plan.status, "ModelExported")["reason"], "Exporting");
  for (const ChildApply& a : plan.applies) EXPECT_NE(NameOf(a.object), "mnist-export");
  c.Carry(plan);
  EXPECT_EQ(c.Pod("mnist-master"), nullptr);  // deleted (here: at once)
  c.coordinator.reset();  // its pod is gone too

  // The master is gone: the export pod, created once.
  plan = c.Plan();
  ASSERT_EQ(plan.applies.size(), 1u);
  EXPECT_EQ(ChildKey(plan.applies[0].resource, NameOf(plan.applies[0].object)), "Pod/mnist-export");
  EXPECT_TRUE(HasReason(plan, "SuccessfulCreatePod"));
  const json& command = plan.applies[0].object["spec"]["containers"][0]["command"];
  EXPECT_EQ(command.back(), "0.9871");  // the final accuracy, for the model card
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["output"]["phase"], "Running");
  EXPECT_EQ((*plan.status)["output"]["message"], "exporting the model to claim models at "
                                                  "mnist/model.pt");
  EXPECT_EQ(plan.requeue_after, std::nullopt);  // the pod's end wakes the operator
  c.Carry(plan);
  EXPECT_TRUE(c.Plan().WritesNothing());  // exporting

  // It wrote the model.
  c.SetPodStatus("mnist-export", Exited(0));
  plan = c.Plan();
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["phase"], "Succeeded");
  EXPECT_EQ((*plan.status)["output"],
            (json{{"claimName", "models"},
                  {"path", "mnist/model.pt"},
                  {"phase", "Succeeded"},
                  {"completionTime", "2026-11-23T06:00:00Z"},
                  {"message", "the model is in claim models at mnist/model.pt (model card "
                              "mnist/model.pt.json)"}}));
  const json exported = ConditionOf(*plan.status, "ModelExported");
  EXPECT_EQ(exported["status"], "True");
  EXPECT_EQ(exported["reason"], "ModelExported");
  const PlannedEvent* event = EventWith(plan, "ModelExported");
  ASSERT_NE(event, nullptr);
  EXPECT_EQ(event->type, "Normal");
  EXPECT_EQ(event->note, "wrote the trained model to claim models at mnist/model.pt");
  EXPECT_TRUE(plan.deletes.empty());  // cleanPodPolicy Running keeps a finished pod
  c.Settle();
  EXPECT_NE(c.Pod("mnist-export"), nullptr);
  ExpectQuietLater(&c);
}

TEST(ReconcileTest, UnderCleanPodPolicyNoneOnlyTheMasterIsStopped) {
  Cluster c = SucceededNow(OutputJob("None"));
  const ReconcilePlan plan = c.Plan();
  ASSERT_EQ(plan.deletes.size(), 1u);
  EXPECT_EQ(plan.deletes[0].name, "mnist-master");
  EXPECT_EQ(plan.deletes[0].grace_period_seconds, std::nullopt);  // SIGTERM: a final checkpoint
  EXPECT_NE(plan.deletes[0].why.find("spec.output"), std::string::npos) << plan.deletes[0].why;
  c.Carry(plan);
  c.coordinator.reset();
  c.Settle();
  ASSERT_NE(c.Pod("mnist-export"), nullptr);
  EXPECT_NE(c.Pod("mnist-coordinator"), nullptr);  // kept, as None says
  EXPECT_NE(c.Pod("mnist-trainer-0"), nullptr);
}

// A master still terminating may be writing its final checkpoint: the
// export waits until its pod has exited (Succeeded, kept) or is gone.
TEST(ReconcileTest, TheExportWaitsForATerminatingMaster) {
  Cluster c = SucceededNow(OutputJob());
  c.Terminate("mnist-master");
  c.Carry(c.Plan());
  c.coordinator.reset();
  c.Settle();
  ASSERT_NE(c.Pod("mnist-master"), nullptr);
  EXPECT_EQ(c.status()["output"]["phase"], "Pending");
  EXPECT_EQ(c.Pod("mnist-export"), nullptr);

  c.SetPodStatus("mnist-master", Exited(0));  // SIGTERM: checkpointed and exited
  c.Settle();
  EXPECT_NE(c.Pod("mnist-export"), nullptr);
  EXPECT_EQ(c.status()["output"]["phase"], "Running");
}

// The export waits for every shard to stop with its final checkpoint, and
// mounts every shard's claim.
TEST(ReconcileTest, TheExportWaitsForEveryMasterShard) {
  json job = OutputJob();
  job["spec"]["master"] = {{"shards", 2}};
  Cluster c = SucceededNow(job);
  c.Terminate("mnist-master-0");
  c.Terminate("mnist-master-1");
  c.Carry(c.Plan());
  c.SetPodStatus("mnist-master-0", Exited(0));  // shard 1 still writing
  ReconcilePlan plan = c.Plan();
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["output"]["message"],
            "waiting for the master mnist-master-0 .. mnist-master-1 to stop with its final "
            "checkpoint");
  for (const ChildApply& a : plan.applies) EXPECT_NE(NameOf(a.object), "mnist-export");
  c.Carry(plan);
  c.SetPodStatus("mnist-master-1", Exited(0));
  plan = c.Plan();
  const json* export_pod = nullptr;
  for (const ChildApply& a : plan.applies) {
    if (NameOf(a.object) == "mnist-export") export_pod = &a.object;
  }
  ASSERT_NE(export_pod, nullptr);
  std::vector<std::string> claims;
  for (const json& v : (*export_pod)["spec"]["volumes"]) {
    if (v.contains("persistentVolumeClaim")) claims.push_back(v["persistentVolumeClaim"]["claimName"]);
  }
  EXPECT_EQ(claims, (std::vector<std::string>{"mnist-checkpoints-0", "mnist-checkpoints-1",
                                              "models"}));
}

TEST(ReconcileTest, AFailedExportLeavesTheJobSucceededAndSaysWhy) {
  Cluster c = SucceededNow(OutputJob());
  c.Settle();
  c.coordinator.reset();
  c.Settle();
  ASSERT_NE(c.Pod("mnist-export"), nullptr);
  c.SetPodStatus("mnist-export",
                 Exited(1, "gaptrain export: cannot write /var/lib/gaptrain/output/mnist/model.pt:"
                           "\n No space left on device\n"));
  const ReconcilePlan plan = c.Plan();
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["phase"], "Succeeded");
  const std::string why =
      "the export pod mnist-export failed (exit code 1 (Error)): gaptrain export: cannot write "
      "/var/lib/gaptrain/output/mnist/model.pt:  No space left on device; the checkpoints stay "
      "in mnist-checkpoints (kubectl logs mnist-export)";
  EXPECT_EQ((*plan.status)["output"]["phase"], "Failed");
  EXPECT_EQ((*plan.status)["output"]["message"], why);
  const json condition = ConditionOf(*plan.status, "ModelExported");
  EXPECT_EQ(condition["status"], "False");
  EXPECT_EQ(condition["reason"], "ExportFailed");
  EXPECT_EQ(condition["message"], why);
  const PlannedEvent* event = EventWith(plan, "ExportFailed");
  ASSERT_NE(event, nullptr);
  EXPECT_EQ(event->type, "Warning");
  EXPECT_TRUE(plan.applies.empty()) << "a failed export is not retried";
  EXPECT_FALSE(plan.ledger.has_value()) << "nor counted against backoffLimit";
  c.Carry(plan);
  ExpectQuietLater(&c);
}

TEST(ReconcileTest, ALostExportPodIsReplaced) {
  Cluster c = SucceededNow(OutputJob());
  c.Settle();
  c.coordinator.reset();
  c.Settle();
  const std::string first_uid = UidOf(*c.Pod("mnist-export"));
  c.SetPodStatus("mnist-export", json::parse(R"j({"phase": "Failed", "reason": "Evicted"})j"));
  ReconcilePlan plan = c.Plan();
  ASSERT_EQ(plan.deletes.size(), 1u);
  EXPECT_EQ(plan.deletes[0].name, "mnist-export");
  EXPECT_EQ(plan.deletes[0].uid, first_uid);
  EXPECT_EQ((*plan.status)["output"]["phase"], "Pending");
  EXPECT_FALSE(HasReason(plan, "ExportFailed"));
  c.Settle();
  ASSERT_NE(c.Pod("mnist-export"), nullptr);
  EXPECT_NE(UidOf(*c.Pod("mnist-export")), first_uid);
  EXPECT_EQ(c.status()["output"]["phase"], "Running");
  EXPECT_EQ(c.status()["preemptions"], 0);  // not a worker
}

TEST(ReconcileTest, AChangedOutputExportsAgain) {
  Cluster c = SucceededNow(OutputJob());
  c.Settle();
  c.coordinator.reset();
  c.Settle();
  c.SetPodStatus("mnist-export", Exited(0));
  c.Settle();
  ASSERT_EQ(c.status()["output"]["phase"], "Succeeded");

  c.job()["spec"]["output"]["path"] = "mnist/again.pt";
  ReconcilePlan plan = c.Plan();
  ASSERT_EQ(plan.deletes.size(), 1u);
  EXPECT_EQ(plan.deletes[0].name, "mnist-export");
  EXPECT_EQ(plan.deletes[0].grace_period_seconds, 0);
  EXPECT_EQ((*plan.status)["output"]["path"], "mnist/again.pt");
  EXPECT_EQ((*plan.status)["output"]["phase"], "Pending");
  c.Settle();
  ASSERT_NE(c.Pod("mnist-export"), nullptr);
  EXPECT_EQ(c.Pod("mnist-export")->at("metadata").at("annotations").at("gaptrain.io/output"),
            "models:mnist/again.pt");
  c.SetPodStatus("mnist-export", Exited(0));
  plan = c.Plan();
  EXPECT_TRUE(HasReason(plan, "ModelExported"));
  c.Carry(plan);
  ExpectQuietLater(&c);

  // Without spec.output the model is still where the status says.
  const json exported = c.status()["output"];
  c.job()["spec"].erase("output");
  c.Settle();
  EXPECT_EQ(c.status()["output"], exported);
  EXPECT_NE(c.Pod("mnist-export"), nullptr);
}

TEST(ReconcileTest, CleanPodPolicyAllDeletesTheExportPodOnceItsOutcomeIsRecorded) {
  Cluster c = SucceededNow(OutputJob("All"));
  c.Settle();
  c.coordinator.reset();
  c.Settle();
  ASSERT_NE(c.Pod("mnist-export"), nullptr);
  EXPECT_EQ(Names(c.pods()), std::vector<std::string>{"mnist-export"});
  c.SetPodStatus("mnist-export", Exited(0));
  ReconcilePlan plan = c.Plan();
  EXPECT_TRUE(plan.deletes.empty()) << "the outcome is not in the status yet";
  c.Carry(plan);
  plan = c.Plan();
  ASSERT_EQ(plan.deletes.size(), 1u);
  EXPECT_EQ(plan.deletes[0].name, "mnist-export");
  EXPECT_FALSE(plan.status.has_value());
  c.Carry(plan);
  EXPECT_TRUE(c.pods().empty());
  EXPECT_EQ(c.status()["output"]["phase"], "Succeeded");  // not exported again
  ExpectQuietLater(&c);
}

TEST(ReconcileTest, TheTtlWaitsForTheExport) {
  json job = OutputJob();
  job["spec"]["runPolicy"]["ttlSecondsAfterFinished"] = 0;
  Cluster c = SucceededNow(job);
  ReconcilePlan plan = c.Plan();
  EXPECT_FALSE(plan.delete_job);
  c.Carry(plan);
  c.coordinator.reset();
  plan = c.Plan();
  EXPECT_FALSE(plan.delete_job);
  c.Carry(plan);
  ASSERT_NE(c.Pod("mnist-export"), nullptr);
  c.SetPodStatus("mnist-export", Exited(0));
  plan = c.Plan();
  EXPECT_TRUE(plan.delete_job);
  EXPECT_TRUE(HasReason(plan, "ModelExported"));
}

// A job that fails has no model to export; one whose output is added after
// it succeeded exports then.
TEST(ReconcileTest, OnlyASucceededJobExports) {
  json job = OutputJob();
  job["status"] = json::parse(R"j({"phase": "Failed", "completionTime": "2026-11-23T06:00:00Z",
      "conditions": [{"type": "Failed", "status": "True"}]})j");
  Cluster failed(job);
  failed.Settle();
  EXPECT_FALSE(failed.status().contains("output"));
  EXPECT_TRUE(failed.pods().empty());

  job = BaseJob();
  job["status"] = json::parse(R"j({"phase": "Succeeded", "completionTime": "2026-11-23T06:00:00Z",
      "conditions": [{"type": "Succeeded", "status": "True"}],
      "progress": {"testAccuracy": 0.99}})j");
  Cluster later(job);
  later.Settle();
  EXPECT_TRUE(later.pods().empty());
  later.job()["spec"]["output"] = {{"claimName", "models"}, {"path", "late.pt"}};
  later.Settle();
  ASSERT_NE(later.Pod("mnist-export"), nullptr);
  EXPECT_EQ(later.Pod("mnist-export")->at("spec").at("containers").at(0).at("command").back(),
            "0.99");
}

// --- bad input ------------------------------------------------------------------

// --- the job's image (recorded_image.h) ---------------------------------------

// The operator as it was when the job started, and as upgraded since.
OperatorConfig OperatorWithImage(const std::string& image) {
  OperatorConfig config;
  config.image = image;
  return config;
}
const char kFirstImage[] = "ghcr.io/gaptrain/gaptrain:0.1.0";
const char kUpgradedImage[] = "ghcr.io/gaptrain/gaptrain:0.2.0";

std::string ImageOf(const json& pod) { return pod["spec"]["containers"][0]["image"]; }

// Preempts `pod` (evicted), carries out the deletion, and settles: the
// replacement as made.
json ReplacePreempted(Cluster* c, const std::string& pod, const OperatorConfig& config) {
  const std::string old_uid = UidOf(*c->Pod(pod));
  c->SetPodStatus(pod, json::parse(R"j({"phase": "Failed", "reason": "Evicted"})j"));
  c->Settle(config);
  const json* replacement = c->Pod(pod);
  EXPECT_NE(replacement, nullptr) << pod;
  if (replacement == nullptr) return json();
  EXPECT_NE(UidOf(*replacement), old_uid);
  return *replacement;
}

TEST(ReconcileTest, AJobKeepsTheImageItsFirstPodsGotThroughAnOperatorUpgrade) {
  const OperatorConfig first = OperatorWithImage(kFirstImage);
  const OperatorConfig upgraded = OperatorWithImage(kUpgradedImage);
  json job = BaseJob();
  job["spec"]["workers"]["maxReplicas"] = 4;
  Cluster c(job);
  const ReconcilePlan created = c.Plan(first);
  ASSERT_TRUE(created.status.has_value());
  EXPECT_EQ((*created.status)["image"], kFirstImage);
  for (const ChildApply& a : created.applies) {
    if (a.resource.kind == "Pod") {
      EXPECT_EQ(ImageOf(a.object), kFirstImage) << NameOf(a.object);
    }
  }
  c.Settle(first);
  c.RunAll();
  c.coordinator = CoordinatorIn("Running");
  c.Settle(first);
  ASSERT_EQ(c.status()["phase"], "Running");

  // The operator restarts with another image: nothing to write, and every
  // pod it makes from now on is the job's image.
  ExpectQuietLater(&c, upgraded);
  EXPECT_EQ(ImageOf(ReplacePreempted(&c, "mnist-trainer-1", upgraded)), kFirstImage);
  EXPECT_EQ(ImageOf(ReplacePreempted(&c, "mnist-evaluator", upgraded)), kFirstImage);
  c.SetPodStatus("mnist-master", FailedWith(137));  // restarted from its volume
  c.coordinator.reset();
  c.Settle(upgraded);
  EXPECT_EQ(ImageOf(*c.Pod("mnist-master")), kFirstImage);
  c.job()["spec"]["workers"]["replicas"] = 4;  // scaled up
  c.Settle(upgraded);
  ASSERT_NE(c.Pod("mnist-trainer-3"), nullptr);
  EXPECT_EQ(ImageOf(*c.Pod("mnist-trainer-3")), kFirstImage);
  // Suspended and resumed: every pod anew, from the job's image still.
  c.job()["spec"]["runPolicy"] = {{"suspend", true}};
  c.Settle(upgraded);
  EXPECT_EQ(c.status()["image"], kFirstImage);
  c.job()["spec"]["runPolicy"] = {{"suspend", false}};
  c.Settle(upgraded);
  ASSERT_EQ(c.Count("Pod"), 7u);
  for (const json& pod : c.pods()) EXPECT_EQ(ImageOf(pod), kFirstImage) << NameOf(pod);
  c.RunAll();
  c.coordinator = CoordinatorIn("Running");
  c.Settle(upgraded);
  EXPECT_EQ(c.status()["image"], kFirstImage);
  EXPECT_FALSE(HasReason(c.Plan(upgraded), "ImageChanged"));
  ExpectQuietLater(&c, upgraded);
}

TEST(ReconcileTest, TheExportPodGetsTheJobsImage) {
  Cluster c = SucceededNow(OutputJob());  // started by an operator of kFirstImage
  ASSERT_EQ(c.status()["image"], OperatorConfig().image);
  const OperatorConfig upgraded = OperatorWithImage(kUpgradedImage);
  c.Carry(c.Plan(upgraded));  // the master stops
  c.coordinator.reset();
  const ReconcilePlan plan = c.Plan(upgraded);
  ASSERT_EQ(plan.applies.size(), 1u);
  EXPECT_EQ(NameOf(plan.applies[0].object), "mnist-export");
  EXPECT_EQ(ImageOf(plan.applies[0].object), OperatorConfig().image);
  if (plan.status) {
    EXPECT_EQ((*plan.status)["image"], OperatorConfig().image);
  }
}

TEST(ReconcileTest, TheImageAnnotationMovesTheJobForPodsMadeFromThenOn) {
  const OperatorConfig operator_config = OperatorWithImage(kUpgradedImage);
  Cluster c = RunningCluster();  // kFirstImage
  const std::string moved = "registry.example.com/gaptrain:0.3.0";
  c.job()["metadata"]["annotations"][kImageAnnotation] = moved;
  const ReconcilePlan plan = c.Plan(operator_config);
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["image"], moved);
  EXPECT_TRUE(plan.deletes.empty());  // running pods keep theirs
  EXPECT_TRUE(plan.applies.empty());
  const PlannedEvent* event = EventWith(plan, "ImageChanged");
  ASSERT_NE(event, nullptr);
  EXPECT_EQ(event->type, "Normal");
  EXPECT_EQ(event->after, PlannedEvent::After::kStatus);
  EXPECT_EQ(event->note, "pods made from now on start " + moved + " (was " + kFirstImage +
                             ", annotation gaptrain.io/image); running pods keep theirs");
  c.Carry(plan);
  ExpectQuietLater(&c, operator_config);
  EXPECT_EQ(ImageOf(*c.Pod("mnist-trainer-0")), kFirstImage);
  EXPECT_EQ(ImageOf(ReplacePreempted(&c, "mnist-trainer-0", operator_config)), moved);
  // Without the annotation the job keeps the image last recorded.
  c.job()["metadata"]["annotations"].erase(kImageAnnotation);
  EXPECT_TRUE(c.Plan(operator_config).WritesNothing());
  EXPECT_EQ(ImageOf(ReplacePreempted(&c, "mnist-trainer-1", operator_config)), moved);
  EXPECT_EQ(c.status()["image"], moved);
  // An empty annotation asks for nothing.
  c.job()["metadata"]["annotations"][kImageAnnotation] = "";
  EXPECT_TRUE(c.Plan(operator_config).WritesNothing());
}

// A job the operator took on before it recorded status.image keeps the
// image its pods run, recorded once; a finished one is left as it is.
TEST(ReconcileTest, AJobFromBeforeStatusImageKeepsWhatItsPodsRun) {
  const OperatorConfig upgraded = OperatorWithImage(kUpgradedImage);
  Cluster c = RunningCluster();
  c.job()["status"].erase("image");
  const ReconcilePlan plan = c.Plan(upgraded);
  ASSERT_TRUE(plan.status.has_value());
  EXPECT_EQ((*plan.status)["image"], kFirstImage);
  EXPECT_FALSE(HasReason(plan, "ImageChanged"));
  c.Carry(plan);
  EXPECT_EQ(ImageOf(ReplacePreempted(&c, "mnist-trainer-1", upgraded)), kFirstImage);
  ExpectQuietLater(&c, upgraded);

  Cluster finished = RunningCluster();
  finished.coordinator = CoordinatorIn("Succeeded");
  finished.Settle();
  ASSERT_EQ(finished.status()["phase"], "Succeeded");
  finished.job()["status"].erase("image");
  ExpectQuietLater(&finished, upgraded);
}

// The operator's pull secrets (--image-pull-secrets) in every pod it makes;
// pods already made are left as they are when they change.
TEST(ReconcileTest, TheOperatorsPullSecretsReachThePodsItMakes) {
  OperatorConfig config;
  config.image_pull_secrets = {"regcred"};
  Cluster c(BaseJob());
  const ReconcilePlan plan = c.Plan(config);
  size_t pods = 0;
  for (const ChildApply& a : plan.applies) {
    if (a.resource.kind != "Pod") continue;
    ++pods;
    EXPECT_EQ(a.object["spec"]["imagePullSecrets"], json::parse(R"j([{"name": "regcred"}])j"))
        << NameOf(a.object);
  }
  EXPECT_EQ(pods, 5u);
  c.Settle(config);
  c.RunAll();
  c.coordinator = CoordinatorIn("Running");
  c.Settle(config);
  config.image_pull_secrets = {"regcred", "mirror"};
  ExpectQuietLater(&c, config);
  EXPECT_EQ(ReplacePreempted(&c, "mnist-trainer-0", config)["spec"]["imagePullSecrets"],
            json::parse(R"j([{"name": "regcred"}, {"name": "mirror"}])j"));
}

TEST(ReconcileTest, AnInvalidSpecFailsWithTheParsersMessage) {
  struct Case {
    const char* name;
    std::function<void(json*)> change;
    const char* message;
  } cases[] = {
      {"minReplicas above replicas",
       [](json* j) { (*j)["spec"]["workers"]["minReplicas"] = 5; },
       "spec.workers.minReplicas: must be <= replicas (2)"},
      {"epochs and maxUpdates",
       [](json* j) { (*j)["spec"]["training"]["maxUpdates"] = 10; },
       "spec.training: set exactly one of epochs and maxUpdates"},
      {"a wrong type", [](json* j) { (*j)["spec"]["workers"]["replicas"] = "two"; },
       "spec.workers.replicas"},
      {"a template of the wrong shape",
       [](json* j) { (*j)["spec"]["workers"]["template"] = {{"spec", {{"containers", 3}}}}; },
       "spec.workers.template.spec.containers: must be a list"},
      {"more master shards than the parser allows",
       [](json* j) { (*j)["spec"]["master"]["shards"] = 65; },
       "spec.master.shards"},
      {"a name too long for its services",
       [](json* j) { (*j)["metadata"]["name"] = std::string(60, 'a'); },
       "metadata.name: on a cluster"},
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.name);
    json job = BaseJob();
    tc.change(&job);
    Cluster c(job);
    const ReconcilePlan plan = c.Plan();
    EXPECT_TRUE(plan.applies.empty());
    ASSERT_TRUE(plan.status.has_value());
    EXPECT_EQ((*plan.status)["phase"], "Failed");
    const json failed = ConditionOf(*plan.status, "Failed");
    EXPECT_EQ(failed["reason"], "FailedValidation");
    EXPECT_NE(failed["message"].get<std::string>().find(tc.message), std::string::npos)
        << failed["message"];
    EXPECT_EQ(EventWith(plan, "FailedValidation")->type, "Warning");
    c.Settle();
    ExpectQuietLater(&c);
  }
}

TEST(ReconcileTest, AnotherJobsPodBlocksTheNameAndIsLeftAlone) {
  Cluster c(BaseJob());
  json foreign = json::parse(R"j({"metadata": {"name": "mnist-trainer-0", "uid": "old",
      "ownerReferences": [{"uid": "old-job", "controller": true}],
      "labels": {"gaptrain.io/replica-type": "trainer", "gaptrain.io/replica-index": "0"}},
      "status": {"phase": "Failed"}})j");
  c.pods().push_back(foreign);
  const ReconcilePlan plan = c.Plan();
  for (const ChildApply& a : plan.applies) EXPECT_NE(NameOf(a.object), "mnist-trainer-0");
  for (const ChildDelete& d : plan.deletes) EXPECT_NE(d.uid, "old");
  EXPECT_FALSE(plan.ledger.has_value());
}

TEST(ReconcileTest, VolumeRetentionChangesOnlyTheClaimsOwner) {
  Cluster c = RunningCluster();
  c.job()["spec"]["runPolicy"] = {{"volumeRetentionPolicy", "Retain"}};
  c.job()["spec"]["master"] = {{"checkpoint", {{"volumeSize", "50Gi"}}}};  // too late to matter
  const ReconcilePlan plan = c.Plan();
  int claims = 0;
  for (const ChildApply& a : plan.applies) {
    if (a.resource.kind != "PersistentVolumeClaim") continue;
    ++claims;
    EXPECT_FALSE(a.creates);
    EXPECT_FALSE(a.object["metadata"].contains("ownerReferences"));
    EXPECT_NE(a.object["spec"]["resources"]["requests"]["storage"], "50Gi");
  }
  EXPECT_EQ(claims, 2);
  c.Settle();
  ExpectQuietLater(&c);
}

// What any plan must be, whatever it observed: it deletes only children it
// observed, by their name and uid; it applies whole objects of the kind it
// names, named, in the job's namespace; a new status has a phase.
void ExpectWellFormed(const ObservedJob& o, const ReconcilePlan& plan) {
  std::set<std::pair<std::string, std::string>> observed;  // (name, uid)
  for (const std::vector<json>* children :
       {&o.pods, &o.services, &o.config_maps, &o.persistent_volume_claims}) {
    for (const json& child : *children) {
      const json meta = child.is_object() ? child.value("metadata", json()) : json();
      if (meta.is_object() && meta.value("name", json()).is_string() &&
          meta.value("uid", json()).is_string()) {
        observed.emplace(meta["name"], meta["uid"]);
      }
    }
  }
  for (const ChildDelete& d : plan.deletes) {
    EXPECT_EQ(observed.count({d.name, d.uid}), 1u) << "deletes unobserved " << d.name;
  }
  // A job has a namespace; one mutated away reads as "".
  const json ns = o.job["metadata"].value("namespace", json());
  const std::string job_namespace = ns.is_string() ? ns.get<std::string>() : "";
  for (const ChildApply& a : plan.applies) {
    ASSERT_TRUE(a.object.is_object());
    EXPECT_EQ(a.object.value("kind", ""), a.resource.kind);
    const json meta = a.object.value("metadata", json::object());
    EXPECT_FALSE(meta.value("name", "").empty()) << a.object.dump();
    EXPECT_EQ(meta.value("namespace", json()), json(job_namespace)) << a.object.dump();
  }
  if (plan.status.has_value()) {
    ASSERT_TRUE(plan.status->is_object());
    EXPECT_TRUE(plan.status->value("phase", json()).is_string()) << plan.status->dump();
  }
}

// Objects of the wrong shape anywhere in the observation never crash the
// reconcile, nor make it plan what it must not (a deterministic fuzz over
// mutated observations).
TEST(ReconcileTest, OddObservationsDoNotCrash) {
  Cluster c = RunningCluster();
  c.SetPodStatus("mnist-trainer-0", FailedWith(1));
  const ObservedJob base = c.Observe();
  const json odd[] = {nullptr, 7, "x", json::array(), json::object(), json::array({1, "a"}),
                      true, -1, 1e300};
  std::mt19937 rng(16);
  for (int round = 0; round < 250; ++round) {
    ObservedJob o = base;
    std::vector<json*> targets = {&o.job};
    for (json& p : o.pods) targets.push_back(&p);
    for (json& s : o.services) targets.push_back(&s);
    for (json& s : o.config_maps) targets.push_back(&s);
    for (json& s : o.persistent_volume_claims) targets.push_back(&s);
    json* target = targets[rng() % targets.size()];
    // Replace a random value somewhere inside it.
    std::vector<json*> inside = {target};
    for (size_t i = 0; i < inside.size() && inside.size() < 500; ++i) {
      if (inside[i]->is_structured()) {
        for (json& child : *inside[i]) inside.push_back(&child);
      }
    }
    *inside[rng() % inside.size()] = odd[rng() % (sizeof(odd) / sizeof(odd[0]))];
    if (target == &o.job) o = [&] {
      ObservedJob re = ObserveJob(o.job);
      re.pods = o.pods;
      re.now = o.now;
      return re;
    }();
    const ReconcilePlan plan = PlanReconcile(o, OperatorConfig());
    SCOPED_TRACE("round " + std::to_string(round));
    ExpectWellFormed(o, plan);
  }
}

// --- Kueue -------------------------------------------------------------------

json QueuedJob() {
  json job = BaseJob();
  job["metadata"]["labels"] = {{"kueue.x-k8s.io/queue-name", "team-queue"}};
  return job;
}

OperatorConfig WithKueue() {
  OperatorConfig config;
  config.kueue = true;
  return config;
}

// What Kueue's scheduler writes: quota in ClusterQueue research, the
// master on on-demand nodes, `trainers` trainers on spot ones.
void Admit(Cluster* c, int trainers) {
  json& w = c->objects("Workload").at(0);
  w["metadata"]["resourceVersion"] = "7";
  w["status"] = AdmittedWorkloadStatus(trainers);
  c->resource_flavors = {
      {{"metadata", {{"name", "on-demand"}}}, {"spec", {{"nodeLabels", {{"pool", "standard"}}}}}},
      {{"metadata", {{"name", "spot"}}}, {"spec", {{"nodeLabels", {{"pool", "spot"}}}}}}};
}

TEST(ReconcileTest, AJobQueuedWithKueueRunsOnlyWhileItsWorkloadIsAdmitted) {
  Cluster c(QueuedJob());
  // Created: its Workload, and no pod until Kueue admits it.
  std::vector<ReconcilePlan> plans = c.Settle(WithKueue());
  ASSERT_EQ(c.Count("Workload"), 1u);
  const json& workload = c.objects("Workload")[0];
  EXPECT_EQ(NameOf(workload), "trainingjob-mnist-job-u");
  EXPECT_EQ(workload["spec"]["queueName"], "team-queue");
  EXPECT_EQ(workload["spec"]["podSets"].size(), 4u);
  EXPECT_EQ(c.Count("Pod"), 0u);
  EXPECT_EQ(c.status()["phase"], "Queued");
  EXPECT_EQ(ConditionOf(c.status(), "Admitted")["status"], "False");
  EXPECT_EQ(ConditionOf(c.status(), "Admitted")["reason"], "Queued");
  EXPECT_TRUE(HasReason(plans[0], "TrainingJobQueued"));
  ExpectQuietLater(&c, WithKueue());

  // Admitted with one trainer of two (partial admission): its pods go
  // where the flavors are, the queue label stays off them.
  Admit(&c, 1);
  plans = c.Settle(WithKueue());
  EXPECT_TRUE(HasReason(plans[0], "Admitted"));
  ASSERT_NE(c.Pod("mnist-trainer-0"), nullptr);
  EXPECT_EQ(c.Pod("mnist-trainer-1"), nullptr);
  EXPECT_EQ((*c.Pod("mnist-trainer-0"))["spec"]["nodeSelector"]["pool"], "spot");
  EXPECT_EQ((*c.Pod("mnist-master"))["spec"]["nodeSelector"]["pool"], "standard");
  EXPECT_FALSE((*c.Pod("mnist-trainer-0"))["metadata"]["labels"].contains(
      "kueue.x-k8s.io/queue-name"));
  EXPECT_EQ(ConditionOf(c.status(), "Admitted")["status"], "True");
  EXPECT_NE(ConditionOf(c.status(), "Admitted")["message"].get<std::string>().find(
                "ClusterQueue research"),
            std::string::npos);
  c.RunAll();
  c.coordinator = CoordinatorIn("Running");
  c.Settle(WithKueue());
  EXPECT_EQ(c.status()["phase"], "Running");

  // Evicted (preempted): every pod stops; the quota is given back only
  // once none is left.
  c.objects("Workload")[0]["status"]["conditions"].push_back(
      WorkloadConditionExample("Evicted", "True", "Preempted", "Preempted to accommodate a workload"));
  c.coordinator.reset();
  const ReconcilePlan evict = c.Plan(WithKueue());
  EXPECT_EQ(evict.deletes.size(), 4u);
  EXPECT_TRUE(evict.status_patches.empty());
  EXPECT_EQ((*evict.status)["phase"], "Queued");
  EXPECT_EQ(ConditionOf(*evict.status, "Admitted")["reason"], "Evicted");
  EXPECT_EQ(EventWith(evict, "Evicted")->type, "Warning");
  c.Carry(evict);
  const ReconcilePlan give_back = c.Plan(WithKueue());
  ASSERT_EQ(give_back.status_patches.size(), 1u);
  EXPECT_EQ(give_back.status_patches[0].name, "trainingjob-mnist-job-u");
  c.Settle(WithKueue());
  const json& returned = c.objects("Workload")[0]["status"];
  EXPECT_FALSE(returned.contains("admission"));
  EXPECT_EQ(ConditionOf(returned, "QuotaReserved")["status"], "False");
  EXPECT_EQ(ConditionOf(returned, "Requeued")["status"], "True");
  EXPECT_EQ(c.Count("Pod"), 0u);
  EXPECT_EQ(c.status()["phase"], "Queued");
  ExpectQuietLater(&c, WithKueue());

  // Admitted again, whole this time, and finished: the Workload too.
  Admit(&c, 2);
  c.Settle(WithKueue());
  EXPECT_NE(c.Pod("mnist-trainer-1"), nullptr);
  c.RunAll();
  c.coordinator = CoordinatorIn("Succeeded");
  c.Settle(WithKueue());
  EXPECT_EQ(c.status()["phase"], "Succeeded");
  EXPECT_EQ(ConditionOf(c.objects("Workload")[0]["status"], "Finished")["reason"], "Succeeded");
  ExpectQuietLater(&c, WithKueue());
}

TEST(ReconcileTest, SuspendingAJobQueuedWithKueueDeactivatesItsWorkload) {
  Cluster c(QueuedJob());
  c.Settle(WithKueue());
  Admit(&c, 2);
  c.Settle(WithKueue());
  ASSERT_EQ(c.Count("Pod"), 5u);
  c.job()["spec"]["runPolicy"] = {{"suspend", true}};
  c.Settle(WithKueue());
  EXPECT_EQ(c.objects("Workload")[0]["spec"]["active"], false);
  EXPECT_EQ(c.status()["phase"], "Suspended");
  EXPECT_EQ(c.Count("Pod"), 0u);
}

TEST(ReconcileTest, WithoutKueueTheQueueLabelIsIgnored) {
  Cluster c(QueuedJob());
  c.Settle();
  EXPECT_EQ(c.Count("Workload"), 0u);
  EXPECT_EQ(c.Count("Pod"), 5u);
  EXPECT_FALSE(
      (*c.Pod("mnist-master"))["metadata"]["labels"].contains("kueue.x-k8s.io/queue-name"));
}

// --- in-cluster TLS ----------------------------------------------------------

TEST(ReconcileTest, ANewJobIsTlsAndKeepsItAnOldOneStaysPlaintext) {
  Cluster c(BaseJob());
  c.tls = JobTls{"CERT", "KEY"};
  c.Settle();
  EXPECT_EQ(c.status()["tls"], true);
  ASSERT_EQ(c.Count("Secret"), 2u);  // the token and NAME-tls
  EXPECT_EQ(NameOf(c.objects("Secret")[1]), "mnist-tls");
  const json& master = *c.Pod("mnist-master");
  EXPECT_NE(master["spec"]["containers"][0]["command"].dump().find("--tls-cert"),
            std::string::npos);
  // Issued anew at each reconcile, the certificate changes nothing later.
  c.tls = JobTls{"OTHER", "KEY2"};
  ExpectQuietLater(&c);

  // A job an older operator started (its image recorded, its pods
  // plaintext) stays plaintext, even with a certificate at hand.
  Cluster old(BaseJob());
  old.Settle();
  ASSERT_FALSE(old.status().contains("tls"));
  old.tls = JobTls{"CERT", "KEY"};
  EXPECT_TRUE(old.Plan().WritesNothing());
  // Its pods recreated (a suspend and resume) are still plaintext.
  old.job()["spec"]["runPolicy"] = {{"suspend", true}};
  old.Settle();
  old.job()["spec"]["runPolicy"] = {{"suspend", false}};
  old.Settle();
  EXPECT_EQ((*old.Pod("mnist-master"))["spec"]["containers"][0]["command"].dump().find(
                "--tls-cert"),
            std::string::npos);
  EXPECT_EQ(old.Count("Secret"), 1u);
}

TEST(ReconcileTest, ANewJobsStatusNeedsItsTokenAnOldOnesStaysOpen) {
  Cluster c(BaseJob());
  const std::vector<ReconcilePlan> plans = c.Settle();
  // Recorded in the job first (with the ledger), the Secret after it.
  ASSERT_EQ(plans[0].annotations.count(kStatusTokenAnnotation), 1u);
  const std::string token = plans[0].annotations.at(kStatusTokenAnnotation);
  EXPECT_EQ(token.size(), 64u);
  EXPECT_EQ(c.job()["metadata"]["annotations"][kStatusTokenAnnotation], token);
  EXPECT_EQ(c.objects("Secret")[0]["stringData"]["status-token"], token);
  const std::string coordinator = (*c.Pod("mnist-coordinator"))["spec"]["containers"][0]["command"].dump();
  EXPECT_NE(coordinator.find("--status-token-file"), std::string::npos) << coordinator;
  ExpectQuietLater(&c);

  // A job an older operator started: no token, /status open, nothing added.
  Cluster old(BaseJob());
  old.Settle();
  old.job()["metadata"]["annotations"].erase(kStatusTokenAnnotation);
  for (json& pod : old.pods()) {
    json& command = pod["spec"]["containers"][0]["command"];
    json kept = json::array();
    for (size_t i = 0; i < command.size(); ++i) {
      if (command[i] == "--status-token-file") {
        ++i;
        continue;
      }
      kept.push_back(command[i]);
    }
    command = kept;
  }
  EXPECT_TRUE(old.Plan().WritesNothing());
  // Its coordinator lost and made again: still without the flag.
  auto& pods = old.pods();
  pods.erase(std::remove_if(pods.begin(), pods.end(),
                            [](const json& p) { return NameOf(p) == "mnist-coordinator"; }),
             pods.end());
  old.Settle();
  ASSERT_NE(old.Pod("mnist-coordinator"), nullptr);
  EXPECT_FALSE(old.job()["metadata"]["annotations"].contains(kStatusTokenAnnotation));
  EXPECT_EQ((*old.Pod("mnist-coordinator"))["spec"]["containers"][0]["command"].dump().find(
                "--status-token-file"),
            std::string::npos);
}

}  // namespace
}  // namespace trainingjob
}  // namespace gaptrain
