#include "operator/progress_reader.h"

#include <chrono>
#include <optional>

#include "operator/trainingjob/desired_children.h"
#include "operator/trainingjob/object_fields.h"
#include "operator/trainingjob/pod_state.h"
#include "services/net/http_client.h"

namespace gaptrain {
namespace {

using trainingjob::ReplicaType;

constexpr std::chrono::seconds kMinimumWindow{1};

// The IP of the job's running pod `name`, or "" (with the reason).
std::string PodIp(const trainingjob::ObservedJob& observed, const std::string& name,
                  std::string* why) {
  const std::string job_uid = trainingjob::UidOf(observed.job);
  for (const nlohmann::json& pod : observed.pods) {
    if (trainingjob::NameOf(pod) != name || !trainingjob::IsControlledBy(pod, job_uid)) continue;
    const trainingjob::PodState state = trainingjob::ReadPodState(pod, false);
    const std::string ip = trainingjob::StringAt(pod, {"status", "podIP"});
    if (!state.running() || ip.empty()) {
      *why = "pod " + name + " is not running";
      return "";
    }
    return ip;
  }
  *why = "pod " + name + " does not exist";
  return "";
}

// GET http://ip:port/path; the body of a 200, or the reason it failed.
std::optional<std::string> Fetch(const std::string& ip, uint16_t port, const std::string& path,
                                 double timeout_seconds, std::string* why,
                                 const std::string& bearer_token = "") {
  HttpClientResponse response;
  const std::string url = "http://" + ip + ":" + std::to_string(port) + path;
  const Status s = HttpGet(ip, port, path, timeout_seconds, &response, bearer_token);
  if (!s.ok()) {
    *why = url + ": " + s.message();
    return std::nullopt;
  }
  if (response.status != 200) {
    *why = url + ": HTTP " + std::to_string(response.status);
    return std::nullopt;
  }
  return std::move(response.body);
}

}  // namespace

void ProgressReader::Read(const std::string& job_key, trainingjob::ObservedJob* observed,
                          std::vector<std::string>* problems) {
  const std::string name = trainingjob::NameOf(observed->job);
  std::string why;

  const std::string coordinator_ip =
      PodIp(*observed, trainingjob::ReplicaName(name, ReplicaType::kCoordinator), &why);
  if (coordinator_ip.empty()) {
    problems->push_back("coordinator status: " + why);
  } else if (auto body = Fetch(coordinator_ip, options_.coordinator_port, "/status",
                               options_.timeout_seconds, &why,
                               trainingjob::StringAt(observed->job,
                                                     {"metadata", "annotations",
                                                      trainingjob::kStatusTokenAnnotation}))) {
    trainingjob::CoordinatorStatus status;
    const Status s = trainingjob::ParseCoordinatorStatus(*body, &status);
    if (s.ok()) {
      observed->coordinator = status;
    } else {
      problems->push_back("coordinator status: " + s.message());
    }
  } else {
    problems->push_back("coordinator status: " + why);
  }

  trainingjob::MasterScrape scrape;
  if (trainingjob::MasterShardsOf(*observed) > 1) {
    // Several masters: the coordinator's status holds every shard's totals
    // (its membership feed reads them each second); one reading for all.
    if (!observed->coordinator || observed->coordinator->masters.empty()) {
      problems->push_back("master totals: the coordinator's status lists no master shard");
      return;
    }
    scrape = trainingjob::ScrapeOfShards(*observed->coordinator, std::chrono::system_clock::now());
  } else {
    const std::string master_ip =
        PodIp(*observed, trainingjob::MasterName(name, 0, 1), &why);
    if (master_ip.empty()) {
      problems->push_back("master metrics: " + why);
      return;
    }
    const std::optional<std::string> text =
        Fetch(master_ip, options_.master_port, "/metrics", options_.timeout_seconds, &why);
    if (!text) {
      problems->push_back("master metrics: " + why);
      return;
    }
    const Status s =
        trainingjob::ParseMasterMetrics(*text, std::chrono::system_clock::now(), &scrape);
    if (!s.ok()) {
      problems->push_back("master metrics: " + s.message());
      return;
    }
  }
  const std::string job_uid = trainingjob::UidOf(observed->job);
  std::lock_guard<std::mutex> lock(mu_);
  auto previous = previous_.find(job_key);
  const bool same_job = previous != previous_.end() && previous->second.job_uid == job_uid;
  observed->master =
      trainingjob::ProgressBetween(same_job ? &previous->second.scrape : nullptr, scrape);
  observed->master_scrape = scrape;
  // Reconciles that follow each other closely (pod events) measure against
  // the same earlier reading, so the rate is never over a sliver of time.
  if (!same_job || scrape.at - previous->second.scrape.at >= kMinimumWindow) {
    previous_[job_key] = Previous{job_uid, scrape};
  }
}

void ProgressReader::Forget(const std::string& job_key) {
  std::lock_guard<std::mutex> lock(mu_);
  previous_.erase(job_key);
}

}  // namespace gaptrain
