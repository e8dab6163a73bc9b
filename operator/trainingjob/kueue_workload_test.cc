// The Workload a queued TrainingJob gets and how Kueue's decisions read:
// a PodSet per role with the pods' own requests, the quota-held PodSets
// kept, spec.active taken back only when the operator set it, the
// admission's flavors on the pods, and the status patches Kueue's job
// reconciler would write.

#include "operator/trainingjob/kueue_workload.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "operator/trainingjob/kueue_admission_example.h"
#include "operator/trainingjob/object_fields.h"
#include "services/testing/status_assertions.h"

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;

json Job() {
  return json{{"apiVersion", "gaptrain.io/v1alpha1"},
              {"kind", "TrainingJob"},
              {"metadata",
               {{"name", "mnist"},
                {"namespace", "team-a"},
                {"uid", "4f1c2d3e-0000-1111-2222-333344445555"},
                {"labels", {{kQueueNameLabel, "team-queue"}}}}}};
}

json Pod(const std::string& type, int index, const std::string& cpu) {
  return json{
      {"metadata",
       {{"name", "mnist-" + type + "-" + std::to_string(index)},
        {"labels",
         {{"gaptrain.io/job-name", "mnist"},
          {"gaptrain.io/replica-type", type},
          {"gaptrain.io/replica-index", std::to_string(index)}}}}},
      {"spec",
       {{"nodeSelector", {{"kubernetes.io/os", "linux"}}},
        {"containers",
         {{{"name", "gaptrain"}, {"resources", {{"requests", {{"cpu", cpu}}}}}}}}}}};
}

DesiredChildren Children(int trainers) {
  DesiredChildren d;
  d.pods = {Pod("master", 0, "1"), Pod("coordinator", 0, "250m"), Pod("evaluator", 0, "1")};
  for (int i = 0; i < trainers; ++i) d.pods.push_back(Pod("trainer", i, "2"));
  return d;
}

TrainingJob Spec(uint32_t replicas, uint32_t min_replicas) {
  TrainingJob spec;
  spec.workers.replicas = replicas;
  spec.workers.min_replicas = min_replicas;
  return spec;
}

// DesiredWorkload, which must succeed.
json Desired(const json& job, const TrainingJob& spec, const DesiredChildren& children,
             const json* observed, const std::vector<json>& workload_classes = {},
             const std::vector<json>& pod_classes = {}) {
  json workload;
  const Status s = DesiredWorkload(job, spec, children, observed,
                                   WorkloadPriorities{workload_classes, pod_classes}, &workload);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return workload;
}

json ConditionIn(const json& conditions, const std::string& type) {
  for (const json& c : conditions) {
    if (c.value("type", "") == type) return c;
  }
  return json();
}

// A Workload Kueue admitted: the trainers on spot capacity, two of them.
json AdmittedWorkload() {
  json w = Desired(Job(), Spec(4, 2), Children(4), nullptr);
  w["metadata"]["resourceVersion"] = "812";
  w["metadata"]["generation"] = 1;
  w["status"] = AdmittedWorkloadStatus(2);
  return w;
}

std::vector<json> Flavors() {
  return {{{"metadata", {{"name", "on-demand"}}},
           {"spec", {{"nodeLabels", {{"cloud.google.com/gke-provisioning", "standard"}}}}}},
          {{"metadata", {{"name", "spot"}}},
           {"spec",
            {{"nodeLabels", {{"cloud.google.com/gke-spot", "true"}}},
             {"tolerations",
              {{{"key", "cloud.google.com/gke-spot"},
                {"operator", "Equal"},
                {"value", "true"},
                {"effect", "NoSchedule"}}}}}}}};
}

TEST(KueueWorkloadTest, HasAPodSetPerRoleWithThePodsOwnTemplates) {
  const json w = Desired(Job(), Spec(4, 2), Children(4), nullptr);
  EXPECT_EQ(WorkloadNameOf(Job()), "trainingjob-mnist-4f1c2");
  EXPECT_EQ(StringAt(w, {"metadata", "name"}), "trainingjob-mnist-4f1c2");
  EXPECT_EQ(StringAt(w, {"metadata", "namespace"}), "team-a");
  EXPECT_EQ(StringAt(w, {"metadata", "labels", "gaptrain.io/job-name"}), "mnist");
  EXPECT_EQ(StringAt(w, {"metadata", "labels", kJobUidLabel}),
            "4f1c2d3e-0000-1111-2222-333344445555");
  EXPECT_EQ(w["metadata"]["ownerReferences"][0]["kind"], "TrainingJob");
  EXPECT_EQ(StringAt(w, {"spec", "queueName"}), "team-queue");
  EXPECT_FALSE(w["spec"].contains("active"));
  const json& sets = w["spec"]["podSets"];
  ASSERT_EQ(sets.size(), 4u) << sets.dump(2);
  EXPECT_EQ(sets[0]["name"], "master");
  EXPECT_EQ(sets[0]["count"], 1);
  EXPECT_EQ(sets[1]["name"], "coordinator");
  EXPECT_EQ(sets[2]["name"], "evaluator");
  EXPECT_EQ(sets[3]["name"], "trainers");
  EXPECT_EQ(sets[3]["count"], 4);
  EXPECT_EQ(sets[3]["minCount"], 2);  // partial admission down to minReplicas
  EXPECT_EQ(sets[3]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"], "2");
  EXPECT_EQ(sets[1]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"], "250m");
  EXPECT_FALSE(sets[0].contains("minCount"));

  // Without minReplicas below replicas, no partial admission; an
  // autoscaling job asks for its ceiling.
  EXPECT_FALSE(
      Desired(Job(), Spec(4, 0), Children(4), nullptr)["spec"]["podSets"][3].contains(
          "minCount"));
  TrainingJob elastic = Spec(2, 1);
  elastic.workers.max_replicas = 6;
  elastic.workers.autoscale.enabled = true;
  const json grows = Desired(Job(), elastic, Children(2), nullptr)["spec"]["podSets"][3];
  EXPECT_EQ(grows["count"], 6);
  EXPECT_EQ(grows["minCount"], 1);
}

// Master shards (spec.master.shards) are the master PodSet's pods, all
// admitted together: none may be left out, so no minCount.
TEST(KueueWorkloadTest, EveryMasterShardIsInTheMasterPodSet) {
  DesiredChildren d = Children(2);
  d.pods.insert(d.pods.begin() + 1, Pod("master", 1, "1"));
  TrainingJob spec = Spec(2, 2);
  spec.master.shards = 2;
  const json w = Desired(Job(), spec, d, nullptr);
  const json& sets = w["spec"]["podSets"];
  ASSERT_EQ(sets.size(), 4u) << sets.dump(2);
  EXPECT_EQ(sets[0]["name"], "master");
  EXPECT_EQ(sets[0]["count"], 2);
  EXPECT_FALSE(sets[0].contains("minCount"));
}

TEST(KueueWorkloadTest, KeepsThePodSetsKueueHoldsQuotaFor) {
  const json admitted = AdmittedWorkload();
  ASSERT_TRUE(HoldsQuota(admitted));
  // Scaled to 6 while admitted: the PodSets stay as admitted (Kueue
  // refuses a change), so nothing is applied.
  const json desired = Desired(Job(), Spec(6, 2), Children(6), &admitted);
  EXPECT_EQ(desired["spec"]["podSets"], admitted["spec"]["podSets"]);
  EXPECT_FALSE(WorkloadNeedsApply(desired, admitted));
  // Queued (no quota): the change goes to the Workload.
  json queued = admitted;
  queued.erase("status");
  const json grown = Desired(Job(), Spec(6, 2), Children(6), &queued);
  EXPECT_EQ(grown["spec"]["podSets"][3]["count"], 6);
  EXPECT_TRUE(WorkloadNeedsApply(grown, queued));
  // A role gone is a change a subset test would miss.
  DesiredChildren no_evaluator = Children(4);
  no_evaluator.pods.erase(no_evaluator.pods.begin() + 2);
  EXPECT_TRUE(
      WorkloadNeedsApply(Desired(Job(), Spec(4, 2), no_evaluator, &queued), queued));
}

TEST(KueueWorkloadTest, DeactivatesWhenSuspendedAndTakesBackOnlyItsOwnDeactivation) {
  json observed = AdmittedWorkload();
  TrainingJob suspended = Spec(4, 2);
  suspended.run_policy.suspend = true;
  const json off = Desired(Job(), suspended, Children(4), &observed);
  EXPECT_EQ(off["spec"]["active"], false);
  EXPECT_TRUE(WorkloadNeedsApply(off, observed));

  // Resumed: the operator's own active=false goes (the apply leaves the
  // field out)...
  observed["spec"]["active"] = false;
  observed["metadata"]["managedFields"] = {
      {{"manager", "gaptrain-operator"},
       {"operation", "Apply"},
       {"fieldsV1", {{"f:spec", {{"f:active", json::object()}, {"f:queueName", json::object()}}}}}}};
  const json on = Desired(Job(), Spec(4, 2), Children(4), &observed);
  EXPECT_TRUE(WorkloadNeedsApply(on, observed));
  // ...an administrator's deactivation stays.
  observed["metadata"]["managedFields"] = {
      {{"manager", "kubectl-patch"},
       {"operation", "Update"},
       {"fieldsV1", {{"f:spec", {{"f:active", json::object()}}}}}}};
  EXPECT_FALSE(WorkloadNeedsApply(on, observed));
}

TEST(KueueWorkloadTest, ReadsWhyKueueHoldsAWorkloadBack) {
  json w = Desired(Job(), Spec(4, 2), Children(4), nullptr);
  WorkloadAdmission a;
  ASSERT_OK(ReadWorkloadAdmission(w, Flavors(), &a));
  EXPECT_EQ(a.state, WorkloadAdmission::State::kQueued);
  EXPECT_EQ(a.message, "waiting for Kueue to consider it");

  w["status"]["conditions"] = {WorkloadConditionExample(
      "QuotaReserved", "False", "Pending",
      "couldn't assign flavors to pod set trainers: insufficient quota for cpu in flavor spot")};
  ASSERT_OK(ReadWorkloadAdmission(w, Flavors(), &a));
  EXPECT_EQ(a.state, WorkloadAdmission::State::kQueued);
  EXPECT_EQ(a.reason, "Pending");
  EXPECT_NE(a.message.find("insufficient quota for cpu"), std::string::npos) << a.message;

  // Quota reserved, an admission check not yet Ready.
  json checking = AdmittedWorkload();
  checking["status"]["conditions"][1] = WorkloadConditionExample("Admitted", "False", "UnsatisfiedChecks");
  ASSERT_OK(ReadWorkloadAdmission(checking, Flavors(), &a));
  EXPECT_EQ(a.state, WorkloadAdmission::State::kQueued);
  EXPECT_EQ(a.reason, "AdmissionChecks");

  json evicted = AdmittedWorkload();
  evicted["status"]["conditions"].push_back(WorkloadConditionExample(
      "Evicted", "True", "Preempted", "Preempted to accommodate a workload (UID: 9) in the ClusterQueue"));
  ASSERT_OK(ReadWorkloadAdmission(evicted, Flavors(), &a));
  EXPECT_EQ(a.state, WorkloadAdmission::State::kEvicted);
  EXPECT_EQ(a.reason, "Preempted");
  // Once its reservation is given back it is queued again.
  evicted["status"]["conditions"][0] = WorkloadConditionExample("QuotaReserved", "False", "Pending");
  ASSERT_OK(ReadWorkloadAdmission(evicted, Flavors(), &a));
  EXPECT_EQ(a.state, WorkloadAdmission::State::kQueued);

  json finished = AdmittedWorkload();
  finished["status"]["conditions"].push_back(WorkloadConditionExample("Finished", "True", "Succeeded", "done"));
  ASSERT_OK(ReadWorkloadAdmission(finished, {}, &a));  // no flavors needed
  EXPECT_EQ(a.state, WorkloadAdmission::State::kFinished);
}

TEST(KueueWorkloadTest, PlacesThePodsWhereTheQuotaIs) {
  json w = AdmittedWorkload();
  // An admission check's (a ProvisioningRequest's) additions to the trainers.
  w["status"]["admissionChecks"] = {
      {{"name", "provisioning"},
       {"state", "Ready"},
       {"podSetUpdates",
        {{{"name", "trainers"},
          {"annotations", {{"autoscaling.x-k8s.io/consume-provisioning-request", "pr-1"}}},
          {"nodeSelector", {{"pool", "gpu-a"}}}}}}}};
  WorkloadAdmission a;
  ASSERT_OK(ReadWorkloadAdmission(w, Flavors(), &a));
  ASSERT_EQ(a.state, WorkloadAdmission::State::kAdmitted);
  EXPECT_EQ(a.cluster_queue, "research");
  EXPECT_EQ(a.pod_sets["trainers"].flavors, "cpu=spot");

  DesiredChildren d = Children(4);
  ASSERT_OK(ApplyAdmission(a, &d));
  ASSERT_EQ(d.pods.size(), 5u);  // the two admitted trainers of four
  EXPECT_EQ(NameOf(d.pods[3]), "mnist-trainer-0");
  EXPECT_EQ(NameOf(d.pods[4]), "mnist-trainer-1");
  const json& trainer = d.pods[3]["spec"];
  EXPECT_EQ(trainer["nodeSelector"],
            json({{"kubernetes.io/os", "linux"}, {"cloud.google.com/gke-spot", "true"},
                  {"pool", "gpu-a"}}));
  ASSERT_EQ(trainer["tolerations"].size(), 1u);
  EXPECT_EQ(trainer["tolerations"][0]["key"], "cloud.google.com/gke-spot");
  EXPECT_EQ(d.pods[3]["metadata"]["annotations"]["autoscaling.x-k8s.io/consume-provisioning-request"],
            "pr-1");
  EXPECT_EQ(d.pods[0]["spec"]["nodeSelector"]["cloud.google.com/gke-provisioning"], "standard");
  EXPECT_FALSE(d.pods[0]["spec"].contains("tolerations"));

  // A flavor the operator has not seen: wait for it.
  EXPECT_EQ(ReadWorkloadAdmission(w, {Flavors()[0]}, &a).code(), Status::Code::kNotFound);

  // A template that pins the node label elsewhere cannot run on the quota.
  ASSERT_OK(ReadWorkloadAdmission(w, Flavors(), &a));
  DesiredChildren pinned = Children(2);
  pinned.pods[3]["spec"]["nodeSelector"]["cloud.google.com/gke-spot"] = "false";
  const Status s = ApplyAdmission(a, &pinned);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(s.message().find("cloud.google.com/gke-spot"), std::string::npos) << s.message();
}

TEST(KueueWorkloadTest, GivesBackTheQuotaAndFinishesAsKueuesJobReconcilerDoes) {
  json w = AdmittedWorkload();
  w["status"]["conditions"].push_back(
      WorkloadConditionExample("Evicted", "True", "Preempted", "Preempted to accommodate a higher priority Workload"));
  const json patch = ClearReservationPatch(w, "2026-11-28T10:05:00Z");
  EXPECT_EQ(patch["metadata"]["resourceVersion"], "812");
  ASSERT_TRUE(patch["status"].contains("admission"));
  EXPECT_TRUE(patch["status"]["admission"].is_null());  // removed by the merge patch
  const json& conditions = patch["status"]["conditions"];
  const json quota = ConditionIn(conditions, "QuotaReserved");
  EXPECT_EQ(quota["status"], "False");
  EXPECT_EQ(quota["reason"], "Pending");
  EXPECT_EQ(quota["lastTransitionTime"], "2026-11-28T10:05:00Z");
  EXPECT_EQ(ConditionIn(conditions, "Admitted")["status"], "False");
  EXPECT_EQ(ConditionIn(conditions, "Requeued")["status"], "True");  // preempted: requeued
  // The eviction itself stays as Kueue wrote it.
  EXPECT_EQ(ConditionIn(conditions, "Evicted")["lastTransitionTime"], "2026-11-28T10:00:00Z");

  // Deactivated (the job suspended): not requeued until active again.
  w["status"]["conditions"].back() = WorkloadConditionExample("Evicted", "True", "Deactivated", "The workload is deactivated");
  EXPECT_EQ(ConditionIn(ClearReservationPatch(w, "2026-11-28T10:05:00Z")["status"]["conditions"],
                        "Requeued")["status"],
            "False");

  const json finished = FinishedPatch(AdmittedWorkload(), true, "the job reached 99%",
                                      "2026-11-28T11:00:00Z");
  EXPECT_EQ(finished["metadata"]["resourceVersion"], "812");
  const json f = ConditionIn(finished["status"]["conditions"], "Finished");
  EXPECT_EQ(f["status"], "True");
  EXPECT_EQ(f["reason"], "Succeeded");
  EXPECT_EQ(f["message"], "the job reached 99%");
  EXPECT_FALSE(finished["status"].contains("admission"));
}

TEST(KueueWorkloadTest, TakesItsPriorityFromTheClassItsLabelNames) {
  json job = Job();
  EXPECT_FALSE(Desired(job, Spec(2, 0), Children(2), nullptr)["spec"].contains("priority"));
  job["metadata"]["labels"][kPriorityClassLabel] = "urgent";
  const std::vector<json> classes = {
      {{"metadata", {{"name", "batch"}}}, {"value", 100}},
      {{"metadata", {{"name", "urgent"}}}, {"value", 10000}}};
  const json w = Desired(job, Spec(2, 0), Children(2), nullptr, classes);
  EXPECT_EQ(w["spec"]["priority"], 10000);
  EXPECT_EQ(w["spec"]["priorityClassRef"],
            json({{"group", "kueue.x-k8s.io"}, {"kind", "WorkloadPriorityClass"}, {"name", "urgent"}}));
  json none;
  const std::vector<json> batch_only = {classes[0]}, no_pod_classes;
  const Status s = DesiredWorkload(job, Spec(2, 0), Children(2), nullptr,
                                   WorkloadPriorities{batch_only, no_pod_classes}, &none);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_NE(s.message().find("'urgent'"), std::string::npos) << s.message();
}

// Without Kueue's label, the PriorityClass the pods name gives the
// priority (the trainers' before the others'), as Kueue's own
// integrations take it; the label wins when both are set.
TEST(KueueWorkloadTest, TakesItsPriorityFromThePodsPriorityClassWithoutTheLabel) {
  json job = Job();
  DesiredChildren children = Children(2);
  for (json& pod : children.pods) {
    const bool trainer = pod["metadata"]["labels"]["gaptrain.io/replica-type"] == "trainer";
    pod["spec"]["priorityClassName"] = trainer ? "spot-training" : "control-plane";
  }
  const std::vector<json> pod_classes = {
      {{"metadata", {{"name", "control-plane"}}}, {"value", 2000000}},
      {{"metadata", {{"name", "spot-training"}}}, {"value", 500}}};
  const std::vector<json> workload_classes = {
      {{"metadata", {{"name", "urgent"}}}, {"value", 10000}}};
  const json w = Desired(job, Spec(2, 0), children, nullptr, workload_classes, pod_classes);
  EXPECT_EQ(w["spec"]["priority"], 500);
  EXPECT_EQ(w["spec"]["priorityClassRef"],
            json({{"group", "scheduling.k8s.io"}, {"kind", "PriorityClass"},
                  {"name", "spot-training"}}));

  job["metadata"]["labels"][kPriorityClassLabel] = "urgent";
  EXPECT_EQ(Desired(job, Spec(2, 0), children, nullptr, workload_classes, pod_classes)["spec"]
                ["priority"],
            10000);

  job["metadata"]["labels"].erase(kPriorityClassLabel);
  json none;
  const std::vector<json> no_classes;
  const Status s = DesiredWorkload(job, Spec(2, 0), children, nullptr,
                                   WorkloadPriorities{workload_classes, no_classes}, &none);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_NE(s.message().find("PriorityClass 'spot-training'"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace trainingjob
}  // namespace gaptrain
