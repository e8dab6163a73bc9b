#include "services/worker/master_link.h"

#include <spdlog/spdlog.h>

#include <sstream>

#include "services/master/layout_proto.h"

namespace gaptrain {
namespace {

std::string Shape(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

}  // namespace

std::string LayoutDifference(const ParameterLayout& master, const ParameterLayout& worker) {
  const auto& m = master.tensors();
  const auto& w = worker.tensors();
  for (size_t i = 0; i < std::min(m.size(), w.size()); ++i) {
    if (m[i].name != w[i].name || m[i].shape != w[i].shape) {
      return "tensor " + std::to_string(i) + " is " + m[i].name + " " + Shape(m[i].shape) +
             " on the master, " + w[i].name + " " + Shape(w[i].shape) + " here";
    }
  }
  if (m.size() != w.size()) {
    return "the master's model has " + std::to_string(m.size()) + " tensors (" +
           std::to_string(master.size()) + " values), this worker's " + std::to_string(w.size()) +
           " (" + std::to_string(worker.size()) + " values)";
  }
  return "";
}

MasterLink::MasterLink(Connector connect, WorkerMetrics* metrics)
    : connect_(std::move(connect)), metrics_(metrics) {}

Status MasterLink::Connect(const std::string& address, const ParameterLayout& layout,
                           const BufferLayout& buffers, RetryLoop* loop) {
  if (address.empty()) {
    return Status::FailedPrecondition(
        "the coordinator named no master (start it with --master HOST:PORT)");
  }
  if (client_ == nullptr || address != address_) {
    client_ = connect_(address);
    address_ = address;
    spdlog::info("master at {}", address);
  }
  proto::DescribeResponse d;
  Status s = CallWithRetry(
      loop, [&] { return client_->Describe(&d); },
      [&](const Status& failure) { NoteFailure("Describe", failure); });
  if (!s.ok()) return s;
  NoteSuccess();
  ParameterLayout theirs;
  Status parsed = LayoutFromProto(d.layout(), &theirs);
  if (!parsed.ok()) {
    return Status::FailedPrecondition("the master at " + address +
                                      " described a malformed model: " + parsed.message());
  }
  const std::string difference = LayoutDifference(theirs, layout);
  if (!difference.empty()) {
    return Status::FailedPrecondition("the master at " + address +
                                      " holds another model: " + difference);
  }
  BufferLayout their_buffers;
  parsed = BufferLayoutFromProto(d.layout(), &their_buffers);
  if (!parsed.ok()) {
    return Status::FailedPrecondition("the master at " + address +
                                      " described malformed buffers: " + parsed.message());
  }
  const std::string buffer_difference =
      their_buffers.DifferenceFrom(buffers, "on the master", "here");
  if (!buffer_difference.empty()) {
    return Status::FailedPrecondition("the master at " + address +
                                      " holds a model with other buffers: " + buffer_difference);
  }
  if (d.needs_echo() && !proto::WireType_IsValid(d.echo_type())) {
    return Status::FailedPrecondition("the master asked for an echo of unknown type " +
                                      std::to_string(d.echo_type()));
  }
  description_ = d;
  spdlog::info("master: job {}, rule {}, version {}, {} live workers{}", d.job_name(), d.rule(),
               d.version(), d.live_workers(),
               d.needs_echo() ? std::string(", echo ") + proto::WireType_Name(d.echo_type()) : "");
  return Status::OK();
}

void MasterLink::NoteFailure(const char* verb, const Status& status) {
  failing_ = true;
  spdlog::debug("master: {} failed: {}", verb, status.ToString());
  if (failures_logged_++ % 10 == 0) {
    spdlog::warn("master: {} failed: {}; retrying", verb, status.ToString());
  }
}

void MasterLink::NoteSuccess() {
  if (failing_) {
    spdlog::info("master: reachable again");
    if (metrics_ != nullptr) metrics_->RecordReconnect(Peer::kMaster);
  }
  failing_ = false;
  failures_logged_ = 0;
}

void MasterLink::NoteVersion(uint64_t version) {
  if (version < highest_version_) {
    spdlog::warn("master: version went back from {} to {}: it restarted from {}",
                 highest_version_, version,
                 version == 0 ? "the initial model (no checkpoint yet)" : "a checkpoint");
    highest_version_ = version;
  }
  highest_version_ = std::max(highest_version_, version);
  if (metrics_ != nullptr) metrics_->SetMasterVersion(version);
}

}  // namespace gaptrain
