#include "services/coordinator/status_json.h"

#include <ctime>
#include <nlohmann/json.hpp>

#include "services/net/token_auth.h"

namespace gaptrain {

std::string Rfc3339(double unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm utc;
  gmtime_r(&t, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::string JobStatusToJson(const JobStatus& s) {
  using nlohmann::json;
  json conditions = json::array();
  for (const JobCondition& c : s.conditions) {
    conditions.push_back({{"type", c.type},
                          {"status", c.status},
                          {"reason", c.reason},
                          {"message", c.message},
                          {"lastTransitionTime", Rfc3339(c.last_transition_time)}});
  }
  json workers = json::array();
  for (const LiveWorkerStatus& w : s.workers) {
    workers.push_back({{"id", w.record.id},
                       {"host", w.record.host},
                       {"role", WorkerRoleName(w.record.role)},
                       {"taskId", w.record.task_id},
                       {"samplesDone", w.record.samples_done},
                       {"loss", w.record.has_loss ? json(w.record.loss) : json(nullptr)},
                       {"secondsSinceHeartbeat", w.seconds_since_heartbeat}});
  }
  json metrics = json::object();
  for (const NamedMetric& m : s.last_eval_metrics) metrics[m.name] = m.value;
  json j = {
      {"jobName", s.job_name},
      {"phase", JobPhaseName(s.phase)},
      {"reason", s.condition.reason},
      {"message", s.condition.message},
      {"conditions", conditions},
      {"workers",
       {{"live", s.live_workers},
        {"liveTrainers", s.live_trainers},
        {"minTrainers", s.min_trainers},
        {"joined", s.counters.joins},
        {"left", s.counters.left_finished},
        {"preempted", s.counters.left_preempted},
        {"failed", s.counters.left_failed},
        {"expired", s.counters.expiries},
        {"list", workers}}},
      {"epoch", s.epoch},
      {"epochs", s.epochs},
      {"maxUpdates", s.max_updates},
      {"tasks",
       {{"total", s.tasks_total},
        {"queued", s.tasks_queued},
        {"inFlight", s.tasks_in_flight},
        {"done", s.tasks_done},
        {"reassigned", s.counters.tasks_reassigned},
        {"staleCompletions", s.counters.stale_completions},
        {"retrained", s.counters.tasks_retrained},
        {"retrainQueued", s.tasks_retrain_queued},
        {"unconfirmed", s.tasks_unconfirmed},
        {"released", s.counters.tasks_released}}},
      {"samples",
       {{"doneInEpoch", s.samples_done_in_epoch},
        {"inEpoch", s.samples_in_epoch},
        {"lost", s.counters.samples_lost},
        {"retrained", s.counters.samples_retrained}}},
      {"progress", s.progress},
      {"masterVersion", s.master_version},
      {"masterRestores", s.counters.master_restores},
      {"evaluation",
       {{"accuracy", s.last_accuracy ? json(*s.last_accuracy) : json(nullptr)},
        {"loss", s.last_accuracy ? json(s.last_eval_loss) : json(nullptr)},
        {"metrics", metrics},
        {"version", s.last_eval_version},
        {"target", s.target.empty() ? json(nullptr) : json(s.target)}}},
  };
  json masters = json::array();
  for (const MasterShardStatus& m : s.masters) {
    masters.push_back({{"shard", m.shard},
                       {"address", m.address},
                       {"reachable", m.reachable},
                       {"version", m.version},
                       {"run", m.run.id},
                       {"parameters", m.totals.parameters},
                       {"updates", m.totals.updates},
                       {"gapSum", m.totals.gap_sum},
                       {"gapCount", m.totals.gap_count},
                       {"stalenessSum", m.totals.staleness_sum},
                       {"stalenessCount", m.totals.staleness_count}});
  }
  j["masters"] = masters;
  j["meanGap"] = s.mean_gap ? json(*s.mean_gap) : json(nullptr);
  j["meanStaleness"] = s.mean_staleness ? json(*s.mean_staleness) : json(nullptr);
  j["updatesPerSecond"] = s.updates_per_second;
  if (s.data_unavailable) {
    const DataUnavailable& d = *s.data_unavailable;
    j["dataUnavailable"] = {{"since", Rfc3339(d.since)},
                            {"message", d.message},
                            {"worker", d.worker},
                            {"host", d.host},
                            {"releases", d.releases}};
  }
  return j.dump(2) + "\n";
}

}  // namespace gaptrain

namespace gaptrain {

void ServeStatus(HttpServer* server, std::function<JobStatus()> describe,
                 const std::string& status_token) {
  server->Handle("/status", [describe = std::move(describe),
                             status_token](const HttpRequest& request) {
    HttpResponse r;
    if (!status_token.empty() && !BearerMatches(request.authorization, status_token)) {
      r.status = 401;
      r.www_authenticate = "Bearer";
      r.body = request.authorization.empty()
                   ? "/status needs 'Authorization: Bearer <status token>' (on a cluster: the "
                     "TrainingJob's annotation gaptrain.io/status-token)\n"
                   : "wrong status token\n";
      return r;
    }
    r.content_type = "application/json";
    r.body = JobStatusToJson(describe());
    return r;
  });
}

}  // namespace gaptrain
