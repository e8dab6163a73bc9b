#include "tests/cluster/running_operator.h"

#include <fstream>

#include "services/base/file_contents.h"
#include "services/net/ports_file.h"

namespace gaptrain {
namespace {

constexpr double kHttpTimeoutSeconds = 5;

}  // namespace

Status RunningOperator::Start(const std::string& dir, const std::string& name,
                              const std::string& kubeconfig, const std::vector<std::string>& args,
                              std::unique_ptr<RunningOperator>* out,
                              const std::vector<std::pair<std::string, std::string>>& env,
                              const std::string& binary) {
  std::unique_ptr<RunningOperator> op(new RunningOperator());
  op->name_ = name;
  op->log_file_ = dir + "/" + name + ".log";
  const std::string kubeconfig_file = dir + "/" + name + ".kubeconfig";
  const std::string ports_file = dir + "/" + name + ".ports";
  std::remove(ports_file.c_str());
  {
    std::ofstream file(kubeconfig_file);
    file << kubeconfig;
    if (!file) return Status::Internal("cannot write " + kubeconfig_file);
  }
  Process::Spec spec;
  spec.binary = binary;
  spec.args = {"--kubeconfig", kubeconfig_file, "--pod-name", name, "--metrics-address",
               "127.0.0.1", "--metrics-port", "0", "--health-port", "0", "--ports-file",
               ports_file};
  spec.args.insert(spec.args.end(), args.begin(), args.end());
  spec.env = env;
  spec.log_file = op->log_file_;
  GAPTRAIN_RETURN_IF_ERROR(Process::Start(spec, &op->process_));
  std::vector<uint16_t> ports;
  GAPTRAIN_RETURN_IF_ERROR(WaitForPortsFile(op->process_.get(), ports_file, 2,
                                            std::chrono::seconds(30), &ports));
  op->metrics_port_ = ports[0];
  op->health_port_ = ports[1];
  *out = std::move(op);
  return Status::OK();
}

Status RunningOperator::GetHealth(const std::string& path, HttpClientResponse* response) const {
  return HttpGet("127.0.0.1", health_port_, path, kHttpTimeoutSeconds, response);
}

MetricsSample RunningOperator::Metrics() const {
  HttpClientResponse response;
  if (!HttpGet("127.0.0.1", metrics_port_, "/metrics", kHttpTimeoutSeconds, &response).ok() ||
      response.status != 200) {
    return {};
  }
  return ParseMetricsText(response.body);
}

double RunningOperator::Metric(const std::string& series, double absent) const {
  return MetricValue(Metrics(), series, absent);
}

std::string RunningOperator::Log() const {
  std::string text;
  ReadFile(log_file_, &text).ok();  // none yet: ""
  return text;
}

}  // namespace gaptrain
