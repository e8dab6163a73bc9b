#include "operator/trainingjob/reconcile.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <set>

#include "operator/trainingjob/desired_children.h"
#include "operator/trainingjob/gang_release.h"
#include "operator/trainingjob/job_autoscale.h"
#include "operator/trainingjob/job_conditions.h"
#include "operator/trainingjob/job_status.h"
#include "operator/trainingjob/json_diff.h"
#include "operator/trainingjob/kueue_workload.h"
#include "operator/trainingjob/object_fields.h"
#include "operator/trainingjob/pod_state.h"
#include "operator/trainingjob/progress_display.h"
#include "operator/trainingjob/recorded_image.h"
#include "services/api/job_fields.h"
#include "services/jobplan/restart_rule.h"

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;
using Clock = std::chrono::system_clock;

bool IsWorker(ReplicaType type) {
  return type == ReplicaType::kTrainer || type == ReplicaType::kEvaluator;
}

// "trainer mnist-trainer-3", "the master mnist-master".
std::string Describe(ReplicaType type, const std::string& pod) {
  return std::string(IsWorker(type) ? "" : "the ") + ReplicaTypeLabelValue(type) + " " + pod;
}

// What the restart rules (services/jobplan) decide for a lost pod.
RestartDecision DecideRestartOf(ReplicaType type, const PodState& pod,
                                const std::string& restart_policy) {
  ProcessEnd end;
  switch (type) {
    case ReplicaType::kMaster: end.process = JobProcess::kMaster; break;
    case ReplicaType::kCoordinator: end.process = JobProcess::kCoordinator; break;
    case ReplicaType::kEvaluator: end.process = JobProcess::kEvaluator; break;
    case ReplicaType::kTrainer: end.process = JobProcess::kTrainer; break;
  }
  end.preempted = pod.loss == PodLoss::kPreempted;
  end.exit_code = pod.exit_code;
  return DecideRestart(end, restart_policy);
}

// The run policy of a job whose spec does not parse: its runPolicy section
// when that alone is valid, else the defaults.
RunPolicySpec LenientRunPolicy(const json& job) {
  RunPolicySpec policy;
  const json* section = FieldAt(job, {"spec", "runPolicy"});
  if (section == nullptr || !section->is_object()) return policy;
  try {
    const YAML::Node node =
        YAML::Load(section->dump(-1, ' ', false, json::error_handler_t::replace));
    RunPolicySpec parsed;
    Status status;
    ReadFields(RunPolicyFields(), node, "spec.runPolicy", &parsed, &status);
    if (status.ok()) policy = parsed;
  } catch (const YAML::Exception&) {
    // Unreadable: the defaults.
  }
  return policy;
}

// How long a finished job waits for the evaluator's final evaluation.
constexpr std::chrono::seconds kFinalEvaluationWait{300};

std::chrono::seconds CeilSeconds(Clock::duration d) {
  return std::max(std::chrono::seconds(1), std::chrono::ceil<std::chrono::seconds>(d));
}

// Whether applying `desired` would change `observed`: a field gaptrain
// owns differs, or the controller reference must go (a PVC whose
// retention became Retain).
bool NeedsApply(const json& desired, const json& observed, const std::string& owner_uid) {
  if (!IsSubset(desired, observed)) return true;
  return !IsControlledBy(desired, owner_uid) && IsControlledBy(observed, owner_uid);
}

const json* FindByName(const std::vector<json>& objects, const std::string& name) {
  for (const json& o : objects) {
    if (NameOf(o) == name) return &o;
  }
  return nullptr;
}

struct ObservedPod {
  const json* object;
  PodState state;
};

struct Ending {
  bool succeeded = false;
  std::string reason;
  std::string message;
};

class Reconciler {
 public:
  Reconciler(const ObservedJob& observed, const OperatorConfig& config)
      : o_(observed),
        config_(config),
        job_(observed.job),
        name_(NameOf(observed.job)),
        uid_(UidOf(observed.job)),
        now_text_(FormatTime(observed.now)),
        old_status_(ObjectAt(observed.job, {"status"})),
        old_(ReadJobStatus(old_status_)),
        ledger_before_(ReadPodLedger(observed.job)),
        ledger_(ledger_before_),
        conditions_(old_.conditions, now_text_),
        image_(JobPodImage(observed.job, observed.pods, config.image)),
        record_image_(!RecordedJobImage(observed.job).empty()),
        autoscale_(old_.autoscale),
        gang_(old_.gang) {
    // Unless a running job measures anew (Active), no window goes on, and
    // no wait for trainers: the releases stay on record.
    autoscale_.erase("window");
    gang_.erase("waitingSince");
  }

  ReconcilePlan Run() {
    plan_.now = o_.now;
    // A job being deleted: the garbage collector removes its children.
    if (!job_.is_object() || IsTerminating(job_)) return std::move(plan_);
    const std::string& old_phase = old_.phase;
    const bool coordinator_done = o_.coordinator && o_.coordinator->finished();
    const bool finished = old_phase == "Succeeded" || old_phase == "Failed";
    ReadPods(finished || coordinator_done);
    tls_ = JobUsesTls();
    if (finished) {
      Terminal(PolicyOfAnySpec(), std::nullopt);
    } else if (!o_.parse_status.ok()) {
      Terminal(LenientRunPolicy(job_), Ending{false, "FailedValidation", o_.parse_status.message()});
    } else if (Status s = BuildDesiredChildren(job_, o_.spec, config_, image_, Credentials(),
                                               &desired_);
               !s.ok()) {
      Terminal(o_.spec.run_policy, Ending{false, "FailedValidation", s.message()});
    } else if (!AdmittedByQueue()) {
      // Kueue holds the job (Queued), or its admission cannot be met.
    } else if (o_.spec.run_policy.suspend) {
      Suspended();
    } else {
      Active();
    }
    FinishWorkload();
    Finalize();
    return std::move(plan_);
  }

 private:
  // --- observation ---------------------------------------------------------

  void ReadPods(bool job_ended) {
    for (const json& pod : o_.pods) {
      const std::string name = NameOf(pod);
      if (name.empty()) continue;
      occupied_.insert(name);
      observed_uids_.insert(UidOf(pod));
      // Another job's pod of the same name (an earlier job that is still
      // going away) only blocks the name; so does one without a uid (no
      // server sends one): a delete must name the uid it saw.
      if (!IsControlledBy(pod, uid_) || UidOf(pod).empty()) continue;
      pods_.push_back(ObservedPod{&pod, ReadPodState(pod, job_ended)});
    }
    std::sort(pods_.begin(), pods_.end(), [](const ObservedPod& a, const ObservedPod& b) {
      return a.state.name < b.state.name;
    });
  }

  // Whether the job has made no pods yet (none now, no image recorded):
  // what it runs with may still be chosen (TLS, the status token). Once it
  // has, that stays, so that its pods always understand each other.
  bool JobIsNew() const { return pods_.empty() && old_.image.empty(); }

  // Whether the job's gRPC is TLS: what it started with (status.tls, or a
  // pod that mounts the certificate, should that status not have been
  // written), else, for a new job, the operator's --job-tls (with a
  // certificate issued). A job an older operator started stays plaintext.
  bool JobUsesTls() const {
    if (old_.tls) return true;
    for (const ObservedPod& p : pods_) {
      for (const json& volume : ArrayAt(*p.object, {"spec", "volumes"})) {
        if (StringAt(volume, {"secret", "secretName"}) == TlsSecretName(name_)) return true;
      }
    }
    return config_.job_tls && !o_.tls.cert_pem.empty() && JobIsNew();
  }

  // The token the coordinator's /status asks for: the job's annotation
  // kStatusTokenAnnotation; a new job gets one (written first, with the
  // ledger, so the Secret created after it holds the same). A job from
  // before has none, and its /status stays open.
  std::string StatusToken() {
    const std::string kept = StringAt(job_, {"metadata", "annotations", kStatusTokenAnnotation});
    if (!kept.empty() || !JobIsNew()) return kept;
    const std::string token = TokenText(o_.status_token_bytes);
    plan_.annotations[kStatusTokenAnnotation] = token;
    return token;
  }

  JobCredentials Credentials() {
    JobCredentials c;
    c.token_bytes = o_.token_bytes;
    c.tls = tls_ ? &o_.tls : nullptr;
    c.status_token = StatusToken();
    return c;
  }

  RunPolicySpec PolicyOfAnySpec() const {
    return o_.parse_status.ok() ? o_.spec.run_policy : LenientRunPolicy(job_);
  }

  RestartLimits LossLimits() const {
    const WorkersSpec& w = o_.spec.workers;
    return RestartLimits{o_.spec.run_policy.backoff_limit, w.replicas, w.Floor(),
                         w.restart_policy};
  }

  const ObservedPod* PodNamed(const std::string& name) const {
    for (const ObservedPod& p : pods_) {
      if (p.state.name == name) return &p;
    }
    return nullptr;
  }

  bool ReadyAndHealthy(const std::string& pod) const {
    const ObservedPod* p = PodNamed(pod);
    return p != nullptr && p->state.running() && p->state.ready && p->state.loss == PodLoss::kNone;
  }

  // The master (every shard of it) and the coordinator are ready: the job
  // can train. A spec that parses only.
  bool ControlReady() const {
    const uint32_t shards = o_.spec.master.shards;
    for (uint32_t shard = 0; shard < shards; ++shard) {
      if (!ReadyAndHealthy(MasterName(name_, shard, shards))) return false;
    }
    return ReadyAndHealthy(ReplicaName(name_, ReplicaType::kCoordinator));
  }

  // --- plan building -------------------------------------------------------

  void Event(const char* type, const std::string& reason, const std::string& action,
             const std::string& note, PlannedEvent::After after, const std::string& child = "") {
    plan_.events.push_back(PlannedEvent{type, reason, action, note, after, child});
  }

  void Delete(const kube::Resource& resource, const PodState& pod,
              std::optional<int64_t> grace, const std::string& why) {
    plan_.deletes.push_back(ChildDelete{resource, pod.name, pod.uid, grace, why});
    Event("Normal", "SuccessfulDeletePod", "Delete", "deleted pod " + pod.name + ": " + why,
          PlannedEvent::After::kChild, ChildKey(resource, pod.name));
  }

  void Apply(const kube::Resource& resource, const json& object, bool creates,
             bool create_only = false) {
    plan_.applies.push_back(ChildApply{resource, object, create_only, creates});
    const std::string kind(resource.kind);
    const std::string name = NameOf(object);
    Event("Normal", (creates ? "SuccessfulCreate" : "SuccessfulUpdate") + kind,
          creates ? "Create" : "Update", (creates ? "created " : "updated ") + kind + " " + name,
          PlannedEvent::After::kChild, ChildKey(resource, name));
  }

  // The ConfigMap, volumes, Services and NetworkPolicy: created when
  // missing, applied when gaptrain's fields differ. (The Secret comes with
  // the pods: CreatePods.)
  void EnsureSupportObjects() {
    const json* cm = FindByName(o_.config_maps, NameOf(desired_.config_map));
    if (cm == nullptr || NeedsApply(desired_.config_map, *cm, uid_)) {
      Apply(kube::kConfigMaps, desired_.config_map, cm == nullptr);
    }
    for (const json& claim : desired_.persistent_volume_claims) {
      const json* have = FindByName(o_.persistent_volume_claims, NameOf(claim));
      if (have == nullptr) {
        Apply(kube::kPersistentVolumeClaims, claim, true);
        continue;
      }
      // A claim's spec is fixed once bound: only its metadata (labels,
      // the owner reference the retention policy asks for) is compared, and
      // the spec applied is the one it has.
      const bool differs =
          !IsSubset(ObjectAt(claim, {"metadata"}), ObjectAt(*have, {"metadata"})) ||
          (!IsControlledBy(claim, uid_) && IsControlledBy(*have, uid_));
      if (!differs) continue;
      json update = claim;
      json spec = json::object();
      for (const char* key : {"accessModes", "resources", "storageClassName"}) {
        if (const json* v = FieldAt(*have, {"spec", key})) spec[key] = *v;
      }
      update["spec"] = std::move(spec);
      Apply(kube::kPersistentVolumeClaims, update, false);
    }
    for (const json& service : desired_.services) {
      const json* have = FindByName(o_.services, NameOf(service));
      if (have == nullptr || NeedsApply(service, *have, uid_)) {
        Apply(kube::kServices, service, have == nullptr);
      }
    }
    if (desired_.network_policy) {
      const json& policy = *desired_.network_policy;
      const json* have = FindByName(o_.network_policies, NameOf(policy));
      // The spec whole: a rule dropped (no Prometheus namespace any more)
      // must go, which "is a subset" would not see.
      if (have == nullptr || NeedsApply(policy, *have, uid_) ||
          ObjectAt(policy, {"spec"}) != ObjectAt(*have, {"spec"})) {
        Apply(kube::kNetworkPolicies, policy, have == nullptr);
      }
    }
  }

  // Creates the desired pods whose names are free (but no trainer while
  // `hold_trainers`: a gang release's backoff), each after the token
  // Secret they mount. The operator does not read Secrets (no list or
  // watch: that would be every Secret in the cluster), so the Secret is
  // created whenever a pod is: AlreadyExists leaves the token as it is,
  // and a reconcile that creates no pod writes no Secret either.
  void CreatePods(bool hold_trainers = false) {
    bool secret_planned = false;
    for (const json& pod : desired_.pods) {
      if (occupied_.count(NameOf(pod)) > 0) continue;
      if (hold_trainers &&
          ReplicaTypeFromLabel(StringAt(pod, {"metadata", "labels", kReplicaTypeLabel})) ==
              ReplicaType::kTrainer) {
        continue;
      }
      if (!secret_planned) {
        Apply(kube::kSecrets, desired_.secret, true, /*create_only=*/true);
        if (desired_.tls_secret) {
          Apply(kube::kSecrets, *desired_.tls_secret, true, /*create_only=*/true);
        }
        secret_planned = true;
      }
      Apply(kube::kPods, pod, true);
    }
  }

  // Counts a lost pod once; returns whether it is recreated.
  bool Account(ReplicaType type, const PodState& p) {
    const RestartDecision decision = DecideRestartOf(type, p, o_.spec.workers.restart_policy);
    if (ledger_.counted.count(p.uid) > 0) return decision.replace;
    ledger_.counted.insert(p.uid);
    if (decision.counts_as_failure) ++ledger_.failures;
    const std::string who = Describe(type, p.name);
    const bool preempted = p.loss == PodLoss::kPreempted;
    if (!IsWorker(type)) {
      ++ledger_.restarts;
      restart_message_ = who + (preempted ? " was lost (" : " failed (") + p.loss_reason +
                         "); recreating it, it resumes from its volume (restart " +
                         std::to_string(ledger_.restarts) + ")";
      Event("Warning", type == ReplicaType::kMaster ? "MasterRestarting" : "CoordinatorRestarting",
            "Recreate", restart_message_, PlannedEvent::After::kLedger);
      restarted_now_ = true;
      return decision.replace;
    }
    if (preempted) {
      ++ledger_.preemptions;
      Event("Normal", "WorkerPreempted", "Recreate",
            who + " was preempted (" + p.loss_reason + "); recreating it",
            PlannedEvent::After::kLedger);
      return decision.replace;
    }
    const std::string outcome = decision.replace
                                    ? "recreating it"
                                    : "not recreated (" + decision.not_replaced_because + ")";
    Event("Warning", "WorkerFailed", decision.replace ? "Recreate" : "Keep",
          who + " failed (" + p.loss_reason + "); " + outcome + " (failure " +
              std::to_string(ledger_.failures) + ", backoffLimit " +
              std::to_string(o_.spec.run_policy.backoff_limit) + ")",
          PlannedEvent::After::kLedger);
    return decision.replace;
  }

  // The coordinator has finished the job, but the evaluator is still
  // scoring the final model (it does once more before it leaves): until
  // when to wait for that, or nullopt to end the job now. Ending it at once
  // would report an older evaluation as the job's accuracy, and
  // cleanPodPolicy would stop the evaluator and the coordinator mid-way.
  std::optional<Clock::time_point> FinalEvaluationDue() const {
    if (!o_.coordinator || !o_.coordinator->finished() || !o_.coordinator->finished_at) {
      return std::nullopt;
    }
    const CoordinatorStatus& c = *o_.coordinator;
    if (c.evaluation_version >= c.master_version) return std::nullopt;  // it is final
    // An evaluator still starting (Pending on a node, or its process not
    // yet up) joins the finished job and scores the final model too; one
    // that cannot be scheduled, has ended or was lost is not waited for.
    const ObservedPod* evaluator = PodNamed(ReplicaName(name_, ReplicaType::kEvaluator));
    if (evaluator == nullptr || !evaluator->state.active() || evaluator->state.unschedulable ||
        evaluator->state.loss != PodLoss::kNone) {
      return std::nullopt;  // no evaluator left to wait for
    }
    const Clock::time_point due = *c.finished_at + kFinalEvaluationWait;
    if (o_.now >= due) return std::nullopt;
    return due;
  }

  // Changes nothing but the progress, and looks again soon (the evaluator's
  // exit also wakes the operator).
  void AwaitFinalEvaluation(Clock::time_point due) {
    phase_ = old_.phase;
    start_time_ = old_.start_time;
    plan_.requeue_after = std::min(config_.progress_poll_interval, CeilSeconds(due - o_.now));
  }

  // spec.runPolicy.scheduleTimeoutSeconds (gang_release.h): a job waiting
  // too long for minReplicas ready trainers gives back the pods its
  // trainers hold and makes none for a while; status.gang keeps the times.
  GangDecision PlanGangRelease() {
    uint32_t ready = 0;
    bool holding = false;
    for (const ObservedPod& p : pods_) {
      if (p.state.type != ReplicaType::kTrainer || !p.state.active()) continue;
      if (p.state.running() && p.state.ready) ++ready;
      holding |= !p.state.unschedulable &&
                 (p.state.running() || !StringAt(*p.object, {"spec", "nodeName"}).empty());
    }
    const GangStatus old = GangStatus::FromJson(old_.gang);
    const GangDecision d =
        DecideGangRelease(o_.spec.run_policy.schedule_timeout_seconds, o_.now,
                          ready < o_.spec.workers.Floor(), holding, JitterOf(uid_), old);
    gang_ = d.status.ToJson();
    if (!d.release) return d;
    const std::string why =
        std::to_string(ready) + " of at least " + std::to_string(o_.spec.workers.Floor()) +
        " trainers ready after " + std::to_string(o_.spec.run_policy.schedule_timeout_seconds) +
        " s (scheduleTimeoutSeconds): their nodes are given back for " +
        std::to_string(d.backoff.count()) + " s";
    for (const ObservedPod& p : pods_) {
      if (p.state.type != ReplicaType::kTrainer || !p.state.active()) continue;
      ledger_.released.insert(p.state.uid);
      Delete(kube::kPods, p.state, std::nullopt, "released: " + why);
    }
    Event("Warning", "TrainersReleased", "Release", why, PlannedEvent::After::kStatus);
    return d;
  }

  void Active() {
    record_image_ = true;  // its pods are made from it
    PlanDataAvailability();
    if (const std::optional<Clock::time_point> due = FinalEvaluationDue()) {
      AwaitFinalEvaluation(*due);
      return;
    }
    const TrainingJob& spec = o_.spec;
    std::map<std::string, ReplicaType> desired_types;
    for (const json& pod : desired_.pods) {
      desired_types[NameOf(pod)] =
          ReplicaTypeFromLabel(StringAt(pod, {"metadata", "labels", kReplicaTypeLabel}))
              .value_or(ReplicaType::kTrainer);
    }

    // Lost pods are counted and (most) replaced; pods beyond the desired
    // set (scaled down) are deleted.
    std::vector<ChildDelete> replacements;
    uint32_t permanent_trainers = 0;
    for (const ObservedPod& pod : pods_) {
      const PodState& p = pod.state;
      const auto desired = desired_types.find(p.name);
      if (desired == desired_types.end()) {
        if (!p.terminating) {
          scale_down_.push_back(ChildDelete{
              kube::kPods, p.name, p.uid,
              p.finished() ? std::optional<int64_t>(0) : std::nullopt,
              "scaled down to " + std::to_string(spec.workers.replicas) + " trainers"});
        }
        continue;
      }
      if (ledger_.released.count(p.uid) > 0) {
        if (p.terminating) continue;  // ours, going away; recreated once gone
        ledger_.released.erase(p.uid);  // wanted again before it went
      }
      if (p.loss == PodLoss::kNone || p.loss == PodLoss::kCompleted) continue;
      const ReplicaType type = desired->second;
      if (!Account(type, p)) {
        if (type == ReplicaType::kTrainer) ++permanent_trainers;
        continue;
      }
      const bool force = p.finished() || (p.node_lost && IsWorker(type));
      if (p.terminating && !(p.node_lost && IsWorker(type))) continue;  // already going
      replacements.push_back(ChildDelete{
          kube::kPods, p.name, p.uid, force ? std::optional<int64_t>(0) : std::nullopt,
          "replacing " + Describe(type, p.name) + " (" + p.loss_reason + ")"});
    }

    start_time_ = old_.start_time;
    if (start_time_.empty()) start_time_ = now_text_;

    if (const std::optional<Ending> ending = EndingOf(permanent_trainers)) {
      Terminal(spec.run_policy, ending);
      return;
    }

    const GangDecision gang = PlanGangRelease();
    EnsureSupportObjects();
    CreatePods(/*hold_trainers=*/gang.hold_trainers);
    for (const ChildDelete& d : replacements) {
      plan_.deletes.push_back(d);
      Event("Normal", "SuccessfulDeletePod", "Delete", "deleted pod " + d.name + ": " + d.why,
            PlannedEvent::After::kChild, ChildKey(kube::kPods, d.name));
    }
    for (const ChildDelete& d : scale_down_) {
      ledger_.released.insert(d.uid);
      plan_.deletes.push_back(d);
      Event("Normal", "SuccessfulDeletePod", "Delete", "deleted pod " + d.name + ": " + d.why,
            PlannedEvent::After::kChild, ChildKey(kube::kPods, d.name));
    }

    // The phase.
    const bool control_ready = ControlReady();
    const bool has_run = conditions_.Get("Running").has_value();
    const bool restarting =
        !control_ready && (restarted_now_ || has_run || conditions_.IsTrue("Restarting"));
    uint32_t ready_trainers = 0;
    uint32_t working_trainers = 0;  // ready and not lost: what the autoscaler counts as running
    for (const ObservedPod& p : pods_) {
      if (p.state.type == ReplicaType::kTrainer && p.state.running() && p.state.ready &&
          desired_types.count(p.state.name) > 0) {
        ++ready_trainers;
        if (p.state.loss == PodLoss::kNone) ++working_trainers;
      }
    }
    const bool running =
        control_ready && (o_.coordinator ? o_.coordinator->phase == "Running"
                                         : ready_trainers >= o_.spec.workers.Floor());

    SetCreated();
    conditions_.Clear("Suspended", "TrainingJobResumed", "TrainingJob " + name_ + " is resumed");
    if (restarting) {
      std::string message = restart_message_;
      if (message.empty()) {
        const std::optional<Condition> old = conditions_.Get("Restarting");
        message = old && old->status == "True"
                      ? old->message
                      : "waiting for the master and the coordinator to be ready again";
      }
      conditions_.Set(Condition{"Restarting", "True", "TrainingJobRestarting", message});
      conditions_.Clear("Running", "TrainingJobRestarting", message);
      phase_ = "Restarting";
    } else {
      conditions_.Clear("Restarting", "TrainingJobRestarted",
                        "the master and the coordinator are ready again");
      if (running) {
        conditions_.Set(Condition{"Running", "True", "TrainingJobRunning",
                                  "TrainingJob " + name_ + " is running"});
        phase_ = "Running";
      } else {
        conditions_.Clear("Running", "TrainingJobPending",
                          "waiting for at least " + std::to_string(o_.spec.workers.Floor()) +
                              " ready trainers (minReplicas)");
        phase_ = "Pending";
      }
    }
    PlanScheduling(/*job_runs=*/true);
    const std::optional<int64_t> old_desired =
        old_.workers ? std::optional<int64_t>(old_.workers->desired) : std::nullopt;
    if (old_desired && *old_desired != spec.workers.replicas) {
      Event("Normal", "TrainingJobScaled", "Scale",
            "trainers: " + std::to_string(*old_desired) + " -> " +
                std::to_string(spec.workers.replicas),
            PlannedEvent::After::kStatus);
    }
    // Progress is polled while the coordinator or the master can answer
    // (their pods ready, or a reading came): the coordinator's phase, the
    // evaluation and the Gap change without any event. Until then only
    // the job's and its pods' events change what the plan reads, and they
    // wake it: a job waiting for nodes costs nothing between events (a
    // thousand Pending jobs polled every 15 s took a fifth of a core).
    if (control_ready || o_.coordinator || o_.master) {
      RequeueWithin(config_.progress_poll_interval);
    }
    if (gang.wake_after) {
      RequeueWithin(std::max(std::chrono::seconds(1),
                             std::chrono::ceil<std::chrono::seconds>(*gang.wake_after)));
    }
    if (spec.run_policy.active_deadline_seconds > 0) {
      if (const auto start = ParseTime(start_time_)) {
        const Clock::time_point deadline =
            *start + std::chrono::seconds(spec.run_policy.active_deadline_seconds);
        RequeueWithin(CeilSeconds(deadline - o_.now));
      }
    }
    PlanAutoscaling(working_trainers);
  }

  // Gap-aware autoscaling (job_autoscale.h): status.autoscale, and a
  // growth or shrink through the scale subresource with its Event once
  // that write succeeded. Holding decisions are in the status only.
  void PlanAutoscaling(uint32_t working_trainers) {
    AutoscaleObservation a;
    a.workers = o_.spec.workers;
    a.job_running = phase_ == "Running";
    a.generation = IntegerAt(job_, {"metadata", "generation"}).value_or(0);
    a.status = old_.autoscale;
    a.master = o_.master_scrape;
    a.running_trainers = working_trainers;
    a.preemptions = ledger_.preemptions;
    a.now = o_.now;
    AutoscalePlan autoscale = PlanAutoscale(a);
    autoscale_ = std::move(autoscale.status);
    if (autoscale.scale_to) {
      plan_.scale_to = autoscale.scale_to;
      Event("Normal", autoscale.reason, "Scale", autoscale.message, PlannedEvent::After::kScale);
    }
    if (autoscale.next_check) RequeueWithin(CeilSeconds(*autoscale.next_check));
  }

  // Reconcile again within `d` (the soonest of what asks).
  void RequeueWithin(std::chrono::seconds d) {
    plan_.requeue_after = plan_.requeue_after ? std::min(*plan_.requeue_after, d) : d;
  }

  // Condition PodsUnschedulable: the pods the scheduler cannot place, with
  // its own words, so `kubectl describe tj` says why a job waits (no spot
  // node, too little CPU, an unbound claim) without describing each pod.
  // Pods are grouped by the scheduler's message, the names cut short: a
  // job of a hundred trainers waits for one reason. The Warning Event comes
  // as it becomes True and when a reason it did not hold appears, not as
  // pods come and go (the scheduler marks a job's pods one at a time).
  // A suspended or finished job waits for nothing (`job_runs` false).
  void PlanScheduling(bool job_runs) {
    std::vector<std::pair<std::string, std::vector<std::string>>> groups;
    size_t waiting = 0;
    for (const ObservedPod& p : pods_) {
      if (!job_runs || !p.state.unschedulable) continue;
      ++waiting;
      auto group = std::find_if(groups.begin(), groups.end(), [&](const auto& g) {
        return g.first == p.state.scheduling_message;
      });
      if (group == groups.end()) {
        groups.emplace_back(p.state.scheduling_message, std::vector<std::string>());
        group = groups.end() - 1;
      }
      group->second.push_back(p.state.name);
    }
    if (waiting == 0) {
      conditions_.Clear("PodsUnschedulable", "PodsScheduled", "no pod waits for a node");
      return;
    }
    const auto count = [](size_t n) {
      return std::to_string(n) + (n == 1 ? " pod" : " pods");
    };
    const auto describe = [](const std::pair<std::string, std::vector<std::string>>& g) {
      constexpr size_t kNames = 3;
      std::string names;
      for (size_t i = 0; i < g.second.size() && i < kNames; ++i) {
        names += (i == 0 ? "" : ", ") + g.second[i];
      }
      if (g.second.size() > kNames) {
        names += " and " + std::to_string(g.second.size() - kNames) + " more";
      }
      return "(" + names + ")" + (g.first.empty() ? "" : ": " + g.first);
    };
    std::string message = count(waiting) + " cannot be scheduled";
    if (groups.size() == 1) {
      message += " " + describe(groups[0]);
    } else {
      for (size_t i = 0; i < groups.size(); ++i) {
        message += (i == 0 ? ": " : "; ") + std::to_string(groups[i].second.size()) + " " +
                   describe(groups[i]);
      }
    }
    const std::optional<Condition> old = conditions_.Get("PodsUnschedulable");
    bool news = !old || old->status != "True";
    for (const auto& g : groups) {
      news = news || old->message.find(g.first) == std::string::npos;
    }
    if (news) {
      Event("Warning", "FailedScheduling", "Schedule", message, PlannedEvent::After::kStatus);
    }
    conditions_.Set(Condition{"PodsUnschedulable", "True", "Unschedulable", message});
  }

  // Condition DataUnavailable: a trainer's data store cannot be reached
  // (the coordinator's dataUnavailable: the trainer handed its task back
  // and waits for the store), in the trainer's own words, and a Warning
  // Event DataUnavailable as it becomes True, once per episode; False
  // (DataAvailable, a Normal Event) once the coordinator no longer reports
  // it (a task was completed since). Without a reading of the coordinator
  // it stays as it was.
  void PlanDataAvailability() {
    if (!o_.coordinator) return;
    const std::optional<DataUnavailableStatus>& away = o_.coordinator->data_unavailable;
    const bool was = conditions_.IsTrue("DataUnavailable");
    if (!away) {
      if (was) {
        const std::string message = "the trainers read their data again";
        Event("Normal", "DataAvailable", "Train", message, PlannedEvent::After::kStatus);
        conditions_.Clear("DataUnavailable", "DataAvailable", message);
      }
      return;
    }
    const std::string worker = "worker " + std::to_string(away->worker);
    const std::string who = away->host.empty() ? worker : away->host + " (" + worker + ")";
    const std::string message =
        "trainer " + who + " cannot reach its data: " + away->message + " (" +
        std::to_string(away->releases) + (away->releases == 1 ? " task" : " tasks") +
        " handed back since " + away->since + ")";
    if (!was) {
      Event("Warning", "DataUnavailable", "Train", message, PlannedEvent::After::kStatus);
    }
    conditions_.Set(Condition{"DataUnavailable", "True", "StoreUnreachable", message});
  }

  std::optional<Ending> EndingOf(uint32_t permanent_trainers) const {
    const TrainingJob& spec = o_.spec;
    if (o_.coordinator && o_.coordinator->finished()) {
      const CoordinatorStatus& c = *o_.coordinator;
      std::string message = c.message.empty() ? c.reason : c.reason + ": " + c.message;
      if (message.empty()) message = "the coordinator reports " + c.phase;
      if (c.phase == "Succeeded") return Ending{true, "TrainingJobSucceeded", message};
      return Ending{false, "TrainingJobFailed", message};
    }
    if (const std::optional<LossFailure> failure =
            FailureAfterLosses(ledger_.failures, permanent_trainers, LossLimits())) {
      return Ending{false, failure->reason, failure->message};
    }
    if (spec.run_policy.active_deadline_seconds > 0) {
      const auto start = ParseTime(start_time_);
      if (start && o_.now >= *start + std::chrono::seconds(
                                          spec.run_policy.active_deadline_seconds)) {
        return Ending{false, "DeadlineExceeded",
                      "the job ran longer than activeDeadlineSeconds (" +
                          std::to_string(spec.run_policy.active_deadline_seconds) + ")"};
      }
    }
    return std::nullopt;
  }

  void SetCreated() {
    if (!conditions_.Get("Created")) {
      Event("Normal", "TrainingJobCreated", "Create",
            "TrainingJob " + name_ + " is created", PlannedEvent::After::kStatus);
    }
    conditions_.Set(Condition{"Created", "True", "TrainingJobCreated",
                              "TrainingJob " + name_ + " is created"});
  }

  // Every pod goes (gracefully, and counted as neither a preemption nor a
  // failure); the volumes stay.
  void StopPods(const std::string& why) {
    for (const ObservedPod& pod : pods_) {
      const PodState& p = pod.state;
      if (p.terminating) continue;
      ledger_.released.insert(p.uid);
      Delete(kube::kPods, p, p.finished() ? std::optional<int64_t>(0) : std::nullopt, why);
    }
  }

  void Suspended() {
    EnsureSupportObjects();
    StopPods("the job is suspended");
    SetCreated();
    const std::string message = "TrainingJob " + name_ + " is suspended";
    conditions_.Clear("Running", "TrainingJobSuspended", message);
    conditions_.Clear("Restarting", "TrainingJobSuspended", message);
    conditions_.Set(Condition{"Suspended", "True", "TrainingJobSuspended", message});
    PlanScheduling(/*job_runs=*/false);
    phase_ = "Suspended";
    start_time_.clear();  // resuming starts the clock again
  }

  // --- Kueue (kueue_workload.h) -----------------------------------------------

  // The job's Workload as observed (ours: controlled by this job), or null.
  const json* ObservedWorkload() const {
    const json* w = FindByName(o_.workloads, WorkloadNameOf(job_));
    return w != nullptr && IsControlledBy(*w, uid_) ? w : nullptr;
  }

  bool QueuedWithKueue() const { return config_.kueue && !QueueNameOf(job_).empty(); }

  // Whether the job may go on to run (or to be suspended): true unless it
  // is queued with Kueue and not admitted, which this plans (Queued). An
  // admitted job's pods get what the admission says (ApplyAdmission).
  bool AdmittedByQueue() {
    if (!QueuedWithKueue()) return true;
    const json* observed = ObservedWorkload();
    const std::string workload = WorkloadNameOf(job_);
    const std::string queue = "LocalQueue " + QueueNameOf(job_);
    json desired;
    if (Status s = DesiredWorkload(job_, o_.spec, desired_, observed,
                                   WorkloadPriorities{o_.workload_priority_classes,
                                                      o_.priority_classes},
                                   &desired);
        !s.ok()) {
      Queued("PriorityClassNotFound", "not sent to " + queue + ": " + s.message());
      plan_.requeue_after = std::chrono::seconds(5);  // the classes' cache does not wake it
      return false;
    }
    if (observed == nullptr || WorkloadNeedsApply(desired, *observed)) {
      Apply(kube::kWorkloads, desired, observed == nullptr);
    }
    if (observed == nullptr) {
      Queued("Pending", "waiting in " + queue + ": its Workload " + workload + " is created");
      return false;
    }
    WorkloadAdmission admission;
    if (Status s = ReadWorkloadAdmission(*observed, o_.resource_flavors, &admission); !s.ok()) {
      Queued("FlavorNotFound", s.message());
      plan_.requeue_after = std::chrono::seconds(1);  // the flavors' cache catches up
      return false;
    }
    GiveBackQuotaOnceStopped(*observed, admission);
    if (o_.spec.run_policy.suspend) return true;  // its Workload is deactivated
    const std::string kueue_says =
        admission.message.empty() ? admission.reason : admission.reason + ": " + admission.message;
    switch (admission.state) {
      case WorkloadAdmission::State::kAdmitted:
        break;
      case WorkloadAdmission::State::kEvicted:
        Queued("Evicted", "Kueue evicted Workload " + workload + " (" + kueue_says +
                              "); its pods are stopped and it waits in " + queue + " again");
        return false;
      case WorkloadAdmission::State::kFinished:
        Queued("WorkloadFinished", "its Workload " + workload + " was finished by Kueue (" +
                                       kueue_says + "); delete it to queue the job again");
        return false;
      case WorkloadAdmission::State::kQueued:
        Queued("Queued", "waiting in " + queue + " for Kueue to admit Workload " + workload +
                             " (" + kueue_says + ")");
        return false;
    }
    if (Status s = ApplyAdmission(admission, &desired_); !s.ok()) {
      Terminal(o_.spec.run_policy, Ending{false, "AdmissionFailed", s.message()});
      return false;
    }
    std::string flavors;
    for (const auto& [pod_set, a] : admission.pod_sets) {
      if (a.flavors.empty()) continue;
      flavors += (flavors.empty() ? "" : "; ") + pod_set + " " + a.flavors;
    }
    conditions_.Set(Condition{"Admitted", "True", "Admitted",
                              "Kueue admitted Workload " + workload + " in ClusterQueue " +
                                  admission.cluster_queue +
                                  (flavors.empty() ? "" : " (flavors: " + flavors + ")")});
    return true;
  }

  // Kueue held back: no pods; condition Admitted False says why.
  void Queued(const std::string& reason, const std::string& message) {
    EnsureSupportObjects();
    StopPods(reason == "Evicted" ? "Kueue evicted the job" : "the job is not admitted by Kueue");
    SetCreated();
    conditions_.Clear("Running", "TrainingJobQueued", message);
    conditions_.Clear("Restarting", "TrainingJobQueued", message);
    conditions_.Set(Condition{"Admitted", "False", reason, message});
    PlanScheduling(/*job_runs=*/false);
    phase_ = "Queued";
    start_time_.clear();  // activeDeadlineSeconds counts from its admission
  }

  // An evicted (or deactivated) Workload's quota is given back once none
  // of the job's pods runs any more, as Kueue's own job reconciler does;
  // Kueue then queues it again.
  void GiveBackQuotaOnceStopped(const json& workload, const WorkloadAdmission& admission) {
    if (admission.state != WorkloadAdmission::State::kEvicted) return;
    for (const ObservedPod& p : pods_) {
      if (!p.state.finished()) return;
    }
    plan_.status_patches.push_back(ChildStatusPatch{kube::kWorkloads, NameOf(workload),
                                                    ClearReservationPatch(workload, now_text_),
                                                    "give back its quota reservation"});
  }

  // A finished job finishes its Workload, which gives its quota back.
  void FinishWorkload() {
    if (!QueuedWithKueue() || (phase_ != "Succeeded" && phase_ != "Failed")) return;
    const json* workload = ObservedWorkload();
    if (workload == nullptr) return;
    WorkloadAdmission admission;
    // (A Finished Workload reads without its flavors.)
    if (ReadWorkloadAdmission(*workload, o_.resource_flavors, &admission).ok() &&
        admission.state == WorkloadAdmission::State::kFinished) {
      return;
    }
    const std::optional<Condition> ended = conditions_.Get(phase_);
    plan_.status_patches.push_back(ChildStatusPatch{
        kube::kWorkloads, NameOf(*workload),
        FinishedPatch(*workload, phase_ == "Succeeded",
                      ended ? ended->message : "TrainingJob " + name_ + " " + phase_, now_text_),
        "the job has finished"});
  }

  // A finished job: `ending` when it finishes now, nullopt when it had.
  void Terminal(const RunPolicySpec& policy, const std::optional<Ending>& ending) {
    if (ending) {
      const std::string result = ending->succeeded ? "Succeeded" : "Failed";
      conditions_.Clear("Running", ending->reason, ending->message);
      conditions_.Clear("Restarting", ending->reason, ending->message);
      conditions_.Set(Condition{result, "True", ending->reason, ending->message});
      phase_ = result;
      completion_time_ = now_text_;
      Event(ending->succeeded ? "Normal" : "Warning", ending->reason,
            ending->succeeded ? "Complete" : "Fail", ending->message,
            PlannedEvent::After::kStatus);
    } else {
      // Its progress was final when it finished: the master's and
      // coordinator's numbers may still drift (a rate decaying towards 0),
      // and a finished job's status is not rewritten for that.
      progress_final_ = true;
      phase_ = old_.phase;
      completion_time_ = old_.completion_time;
      if (!ParseTime(completion_time_)) completion_time_ = now_text_;
    }
    if (start_time_.empty()) start_time_ = old_.start_time;
    terminal_ = true;
    PlanScheduling(/*job_runs=*/false);

    // cleanPodPolicy: All deletes every pod, Running the ones still going.
    // The export has rules of its own: its pod is left to PlanExport until
    // the status holds its outcome, and the master is stopped whatever the
    // policy, as its final checkpoint is what the export reads.
    const bool exports = ExportWanted();
    for (const ObservedPod& pod : pods_) {
      const PodState& p = pod.state;
      if (p.terminating) continue;
      if (IsExportPod(pod)) {
        if (policy.clean_pod_policy == "All" && p.finished() && ExportRecorded()) {
          Delete(kube::kPods, p, 0, "the job has finished (cleanPodPolicy All)");
        }
        continue;
      }
      const bool stop_master = exports && p.type == ReplicaType::kMaster && !p.finished();
      if (!stop_master && policy.clean_pod_policy == "None") continue;
      if (!stop_master && policy.clean_pod_policy == "Running" && p.finished()) continue;
      Delete(kube::kPods, p, p.finished() ? std::optional<int64_t>(0) : std::nullopt,
             policy.clean_pod_policy == "None"
                 ? "the job has succeeded; the master stops with a final checkpoint, which "
                   "spec.output exports"
                 : "the job has finished (cleanPodPolicy " + policy.clean_pod_policy + ")");
    }
    const bool exporting = exports && PlanExport();
    // An export done before spec.output was removed (or stopped parsing):
    // its model is still where the status says.
    if (!exports) output_ = old_.output;

    // No TTL: the job (and its model, its checkpoints) stays until deleted.
    // An export under way is waited for; its pod's end wakes the reconcile.
    if (policy.ttl_seconds_after_finished == kKeepFinishedJob || exporting) return;
    const Clock::time_point completed = ParseTime(completion_time_).value_or(o_.now);
    const Clock::time_point due =
        completed + std::chrono::seconds(policy.ttl_seconds_after_finished);
    if (o_.now >= due) {
      plan_.delete_job = true;
      Event("Normal", "TrainingJobDeleted", "Delete",
            "ttlSecondsAfterFinished (" + std::to_string(policy.ttl_seconds_after_finished) +
                ") has passed since the job finished; deleting it",
            PlannedEvent::After::kStatus);
    } else {
      plan_.requeue_after = CeilSeconds(due - o_.now);
    }
  }

  // --- the model's export (spec.output) ------------------------------------

  // The job succeeded and names a destination for its model.
  bool ExportWanted() const {
    return phase_ == "Succeeded" && o_.parse_status.ok() && !o_.spec.output.claim_name.empty();
  }

  static bool IsExportPod(const ObservedPod& pod) {
    return StringAt(*pod.object, {"metadata", "labels", kReplicaTypeLabel}) == kExportReplicaType;
  }

  // The observed status.output, when it describes an export to the
  // destination spec.output names now.
  json OldOutput() const {
    const json& old = old_.output;
    if (!o_.parse_status.ok() || StringAt(old, {"claimName"}) != o_.spec.output.claim_name ||
        StringAt(old, {"path"}) != o_.spec.output.path) {
      return json::object();
    }
    return old;
  }

  // The status already holds the outcome of the export to spec.output.
  bool ExportRecorded() const {
    const std::string phase = StringAt(OldOutput(), {"phase"});
    return phase == "Succeeded" || phase == "Failed";
  }

  // Every master shard has exited (its pod finished: it wrote a final
  // checkpoint on SIGTERM) or is gone; a master still terminating may be
  // writing it. The master's pods are the job's of that type, whatever
  // their names.
  bool MasterStopped() const {
    for (const ObservedPod& p : pods_) {
      if (p.state.type == ReplicaType::kMaster && !p.state.finished()) return false;
    }
    return true;
  }

  // `name(0, 1)` with one master shard; "`name(0, S)` .. `name(S-1, S)`"
  // with several.
  std::string ShardNames(std::string (*name)(const std::string&, uint32_t, uint32_t)) const {
    const uint32_t shards = o_.spec.master.shards;
    if (shards <= 1) return name(name_, 0, 1);
    return name(name_, 0, shards) + " .. " + name(name_, shards - 1, shards);
  }

  // Plans the export pod and sets output_ (status.output) and condition
  // ModelExported: the pod NAME-export is created once the master has
  // stopped, its end is the export's outcome (Succeeded, or Failed with the
  // pod's reason: the job stays Succeeded either way, its checkpoints
  // kept), a lost pod is replaced, and a changed spec.output exports again.
  // Returns whether the export is still to finish.
  bool PlanExport() {
    const OutputSpec& out = o_.spec.output;
    const std::string pod_name = ExportPodName(name_);
    const std::string where = "claim " + out.claim_name + " at " + out.path;
    const json old = OldOutput();
    const std::string old_phase = StringAt(old, {"phase"});
    const ObservedPod* pod = PodNamed(pod_name);
    std::string phase, message;
    if (pod != nullptr &&
        StringAt(*pod->object, {"metadata", "annotations", kOutputAnnotation}) !=
            OutputTarget(out)) {
      // An export to an earlier destination: it goes, then a new one starts.
      if (!pod->state.terminating) {
        Delete(kube::kPods, pod->state,
               pod->state.finished() ? std::optional<int64_t>(0) : std::nullopt,
               "spec.output has changed");
      }
      phase = "Pending";
      message = "spec.output has changed: exporting again once " + pod_name + " is gone";
    } else if (pod != nullptr) {
      const PodState& p = pod->state;
      if (p.loss == PodLoss::kCompleted) {
        phase = "Succeeded";
        message = "the model is in " + where + " (model card " + out.path + ".json)";
      } else if (p.loss == PodLoss::kFailed) {
        phase = "Failed";
        const std::string said = TerminationMessage(*pod->object);
        message = "the export pod " + pod_name + " failed (" + p.loss_reason + ")" +
                  (said.empty() ? "" : ": " + said) +
                  "; the checkpoints stay in " + ShardNames(CheckpointsClaimName) +
                  " (kubectl logs " + pod_name + ")";
      } else if (p.loss == PodLoss::kPreempted) {
        // Lost with its node, evicted, deleted: the export is run again.
        if (!p.terminating || p.node_lost) {
          Delete(kube::kPods, p, p.finished() || p.node_lost ? std::optional<int64_t>(0)
                                                              : std::nullopt,
                 "the export pod was lost (" + p.loss_reason + "); exporting again");
        }
        phase = "Pending";
        message = "the export pod was lost (" + p.loss_reason + "); exporting again";
      } else {
        phase = "Running";
        message = "exporting the model to " + where;
        if (p.unschedulable) message += "; the pod waits for a node: " + p.scheduling_message;
      }
    } else if (old_phase == "Succeeded" || old_phase == "Failed") {
      phase = old_phase;  // its pod is gone since (cleanPodPolicy All, or by hand)
      message = StringAt(old, {"message"});
    } else if (!MasterStopped()) {
      phase = "Pending";
      message = "waiting for the master " + ShardNames(MasterName) +
                " to stop with its final checkpoint";
    } else if (occupied_.count(pod_name) > 0) {
      phase = "Pending";
      message = "waiting for another object's pod " + pod_name + " to go";
    } else {
      json export_pod;
      const Status built = BuildExportPod(job_, o_.spec, config_, image_,
                                          Progress().test_accuracy, &export_pod);
      if (built.ok()) {
        Apply(kube::kPods, export_pod, true);
        record_image_ = true;
        phase = "Running";
        message = "exporting the model to " + where;
      } else {
        phase = "Failed";
        message = "the export pod cannot be built: " + built.message();
      }
    }

    output_ = {{"claimName", out.claim_name}, {"path", out.path}, {"phase", phase},
               {"message", message}};
    const bool done = phase == "Succeeded" || phase == "Failed";
    if (done) {
      // When it ended: kept from the observation that first saw it.
      const std::string ended = StringAt(old, {"completionTime"});
      output_["completionTime"] = old_phase == phase && !ended.empty() ? ended : now_text_;
    }
    if (phase == "Succeeded") {
      if (old_phase != "Succeeded") {
        Event("Normal", "ModelExported", "Export", "wrote the trained model to " + where,
              PlannedEvent::After::kStatus);
      }
      conditions_.Set(Condition{"ModelExported", "True", "ModelExported", message});
    } else if (phase == "Failed") {
      if (old_phase != "Failed") {
        Event("Warning", "ExportFailed", "Export", message, PlannedEvent::After::kStatus);
      }
      conditions_.Set(Condition{"ModelExported", "False", "ExportFailed", message});
    } else {
      conditions_.Set(Condition{"ModelExported", "False", "Exporting", message});
    }
    return !done;
  }

  // What a terminated container said: its termination message (the tail of
  // its log when it failed: FallbackToLogsOnError), on one line, cut short.
  static std::string TerminationMessage(const json& pod) {
    for (const json& c : ArrayAt(pod, {"status", "containerStatuses"})) {
      if (StringAt(c, {"name"}) != kContainerName) continue;
      std::string text = StringAt(c, {"state", "terminated", "message"});
      std::string line;
      for (char ch : text) line += ch == '\n' ? ' ' : ch;
      while (!line.empty() && line.back() == ' ') line.pop_back();
      constexpr size_t kMost = 500;
      if (line.size() > kMost) line = "..." + line.substr(line.size() - kMost);
      return line;
    }
    return "";
  }

  // --- status --------------------------------------------------------------

  std::map<std::string, ReplicaCounts> ReplicaStatuses() const {
    std::map<std::string, ReplicaCounts> statuses;
    for (ReplicaType type : kReplicaTypes) {
      ReplicaCounts& c = statuses[ReplicaTypeStatusKey(type)];
      for (const ObservedPod& p : pods_) {
        if (p.state.type != type) continue;
        if (p.state.running()) ++c.active;
        if (p.state.running() && p.state.ready) ++c.ready;
        if (p.state.phase == "Succeeded") ++c.succeeded;
        if (p.state.phase == "Failed") ++c.failed;
      }
    }
    return statuses;
  }

  JobProgress Progress() const {
    JobProgress progress = old_.progress;
    if (progress_final_) return progress;
    uint64_t version = progress.model_version.value_or(0);
    bool read_version = false;
    if (o_.coordinator) {
      const CoordinatorStatus& c = *o_.coordinator;
      progress.epoch = c.EpochsDone();
      version = c.master_version;
      read_version = true;
      if (c.test_accuracy) {
        progress.test_accuracy = *c.test_accuracy;
        progress.test_metrics = c.test_metrics;  // those of this evaluation only
      }
      if (c.test_loss) progress.test_loss = *c.test_loss;
    }
    if (o_.master) {
      const MasterProgress& m = *o_.master;
      version = read_version ? std::max(version, m.model_version) : m.model_version;
      read_version = true;
      if (m.mean_gap) progress.mean_gap = *m.mean_gap;
      if (m.mean_staleness) progress.mean_staleness = *m.mean_staleness;
      if (m.updates_per_second) progress.updates_per_second = *m.updates_per_second;
    }
    if (read_version) progress.model_version = version;
    return progress;
  }

  JobStatus NewStatus() const {
    JobStatus status;
    status.phase = phase_;
    status.conditions = conditions_.ToJson();
    status.observed_generation = IntegerAt(job_, {"metadata", "generation"});
    status.start_time = start_time_;
    status.completion_time = completion_time_;
    status.replica_statuses = ReplicaStatuses();
    WorkersStatus workers;
    for (const ObservedPod& p : pods_) {
      if (p.state.type != ReplicaType::kTrainer) continue;
      if (p.state.running()) ++workers.active;
      if (p.state.running() && p.state.ready) ++workers.ready;
    }
    if (o_.parse_status.ok()) {
      workers.desired = o_.spec.workers.replicas;
    } else if (old_.workers) {
      workers.desired = old_.workers->desired;
    }
    workers.selector = std::string(kJobNameLabel) + "=" + name_ + "," + kReplicaTypeLabel + "=" +
                       ReplicaTypeLabelValue(ReplicaType::kTrainer);
    workers.summary = std::to_string(workers.ready) + "/" + std::to_string(workers.desired);
    status.workers = workers;
    status.preemptions = ledger_.preemptions;
    status.failures = ledger_.failures;
    status.restarts = ledger_.restarts;
    status.progress = Progress();
    // The same numbers as `kubectl get tj` prints them (a pure function of
    // progress, so a finished job's stays as it finished).
    const json progress = status.progress.ToJson();
    status.display = o_.parse_status.ok()
                         ? ProgressDisplay(progress, o_.spec.training.epochs, phase_,
                                           JobTarget(o_.spec.training))
                         : ProgressDisplay(progress, 0, phase_, TargetSpec());
    status.output = output_;
    status.autoscale = autoscale_;
    status.gang = gang_;
    if (record_image_) status.image = image_;
    status.tls = tls_;
    return status;
  }

  void Finalize() {
    const std::string& old_phase = old_.phase;
    if (!terminal_ && phase_ != old_phase) {
      if (phase_ == "Running") {
        Event("Normal", "TrainingJobRunning", "Run", "TrainingJob " + name_ + " is running",
              PlannedEvent::After::kStatus);
      } else if (phase_ == "Restarting") {
        Event("Warning", "TrainingJobRestarting", "Restart",
              conditions_.Get("Restarting")->message, PlannedEvent::After::kStatus);
      } else if (phase_ == "Suspended") {
        Event("Normal", "TrainingJobSuspended", "Suspend",
              "TrainingJob " + name_ + " is suspended", PlannedEvent::After::kStatus);
      }
      const std::optional<Condition> admitted = conditions_.Get("Admitted");
      if (phase_ == "Queued" && admitted) {
        const bool evicted = admitted->reason == "Evicted";
        Event(evicted ? "Warning" : "Normal", evicted ? "Evicted" : "TrainingJobQueued",
              evicted ? "Stop" : "Queue", admitted->message, PlannedEvent::After::kStatus);
      } else if (old_phase == "Queued" && admitted && admitted->status == "True") {
        Event("Normal", "Admitted", "Admit", admitted->message, PlannedEvent::After::kStatus);
      }
      if (old_phase == "Suspended") {
        Event("Normal", "TrainingJobResumed", "Resume", "TrainingJob " + name_ + " is resumed",
              PlannedEvent::After::kStatus);
      }
    }
    const std::string& old_image = old_.image;
    if (record_image_ && !old_image.empty() && old_image != image_) {
      Event("Normal", "ImageChanged", "Update",
            "pods made from now on start " + image_ + " (was " + old_image + ", annotation " +
                kImageAnnotation + "); running pods keep theirs",
            PlannedEvent::After::kStatus);
    }
    json status = NewStatus().ToJson();
    if (status != old_status_) plan_.status = std::move(status);
    if (ledger_ != ledger_before_) {
      PruneLedger(observed_uids_, &ledger_);
      plan_.ledger = ledger_;
    }
  }

  const ObservedJob& o_;
  const OperatorConfig& config_;
  const json& job_;
  const std::string name_;
  const std::string uid_;
  const std::string now_text_;
  const json old_status_;
  const JobStatus old_;  // old_status_, typed
  const PodLedger ledger_before_;
  PodLedger ledger_;
  JobConditions conditions_;
  // The image of pods made now where their template names none, and
  // whether status.image holds it (once pods were made from it, or asked
  // for by the annotation).
  const std::string image_;
  bool record_image_;
  bool tls_ = false;  // JobUsesTls

  DesiredChildren desired_;
  std::vector<ObservedPod> pods_;        // controlled by this job, by name
  std::set<std::string> occupied_;       // names of every observed pod
  std::set<std::string> observed_uids_;  // uids of every observed pod
  std::vector<ChildDelete> scale_down_;
  bool restarted_now_ = false;
  std::string restart_message_;
  bool terminal_ = false;
  bool progress_final_ = false;  // finished before this reconcile: keep its progress
  json output_ = json::object();  // status.output; empty: none
  json autoscale_;                // status.autoscale; empty: none
  json gang_;                     // status.gang (gang_release.h); empty: none

  std::string phase_;
  std::string start_time_;
  std::string completion_time_;
  ReconcilePlan plan_;
};

}  // namespace

std::string ChildKey(const kube::Resource& resource, const std::string& name) {
  return std::string(resource.kind) + "/" + name;
}

ReconcilePlan PlanReconcile(const ObservedJob& observed, const OperatorConfig& config) {
  return Reconciler(observed, config).Run();
}

}  // namespace trainingjob
}  // namespace gaptrain
