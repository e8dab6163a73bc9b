#include "cli/run/status_command.h"

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdio>

#include "cli/run/run_dir.h"
#include "cli/run/run_report.h"
#include "services/base/flag_values.h"
#include "services/coordinator/coordinator_client.h"

namespace gaptrain {
namespace {

constexpr char kUsage[] =
    "usage: gaptrain status [NAME] [--run-dir DIR] [--json]\n"
    "       gaptrain status --coordinator HOST:PORT [--token-file FILE] [--json]\n"
    "Prints a running job's phase, progress, last evaluation and workers.\n"
    "  NAME                    a job started here with 'gaptrain run' (its run directory\n"
    "                          is runs/NAME)\n"
    "  --run-dir DIR           the run directory of a local job\n"
    "  --coordinator HOST:PORT any job's coordinator (e.g. through kubectl port-forward);\n"
    "                          the token from --token-file or $GAPTRAIN_TOKEN\n"
    "  --json                  the status as JSON (proto3 JSON mapping)\n";

int Fail(const std::string& message, int code) {
  std::fprintf(stderr, "gaptrain status: %s\n", message.c_str());
  return code;
}

std::string Printf(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

}  // namespace

std::string FormatJobStatus(const proto::CoordinatorStatusResponse& st) {
  std::string text = "job " + st.job_name() + ": " + PhaseName(st.phase());
  if (!st.reason().empty()) text += " (" + st.reason() + ")";
  text += "\n";
  if (!st.message().empty()) text += "  " + st.message() + "\n";
  text += "  epoch " + std::to_string(st.epoch() + 1);
  if (st.epochs() > 0) text += " of " + Printf("%g", st.epochs());
  text += ", " + Printf("%.1f%%", 100 * st.progress()) + " of the job; tasks " +
          std::to_string(st.tasks_done()) + "/" + std::to_string(st.tasks_total()) + " done, " +
          std::to_string(st.tasks_in_flight()) + " in flight, " +
          std::to_string(st.tasks_queued()) + " queued\n";
  if (st.masters_size() > 1) {
    for (const proto::MasterShardStatus& m : st.masters()) {
      text += "  master shard " + std::to_string(m.shard()) + " " + m.address() + ": version " +
              std::to_string(m.version()) + ", " + std::to_string(m.totals().updates()) +
              " updates this run" + (m.reachable() ? "" : ", unreachable") + "\n";
    }
  }
  text += "  master version " + std::to_string(st.master_version());
  if (st.has_last_accuracy()) {
    text += "; last evaluation " + Printf("%.2f%%", 100 * st.last_accuracy()) + " (loss " +
            Printf("%.4f", st.last_eval_loss()) + ") at version " +
            std::to_string(st.last_eval_version());
    for (const proto::EvalMetric& m : st.last_eval_metrics()) {
      text += ", " + m.name() + " " + Printf("%.4g", m.value());
    }
  } else {
    text += "; not evaluated yet";
  }
  text += "\n";
  if (!st.target().empty()) text += "  target: " + st.target() + "\n";
  if (st.has_data_unavailable()) {
    const proto::DataUnavailable& d = st.data_unavailable();
    text += "  data unavailable: trainer " + d.host() + " (worker " +
            std::to_string(d.worker_id()) + "): " + d.message() + " (" +
            std::to_string(d.releases()) + (d.releases() == 1 ? " task" : " tasks") +
            " handed back)\n";
  }
  text += "  workers: " + std::to_string(st.live_workers()) + " live (" +
          std::to_string(st.live_trainers()) + " trainers, at least " +
          std::to_string(st.min_trainers()) + " needed); " + std::to_string(st.joined()) +
          " joined, " + std::to_string(st.preempted()) + " preempted, " +
          std::to_string(st.failed()) + " failed, " + std::to_string(st.expired()) +
          " lost (lease expired); " + std::to_string(st.tasks_reassigned()) +
          " tasks reassigned" +
          (st.tasks_released() > 0
               ? ", " + std::to_string(st.tasks_released()) + " handed back (data unavailable)"
               : std::string()) +
          "\n";
  if (st.workers_size() > 0) {
    char line[160];
    std::snprintf(line, sizeof line, "  %4s  %-16s %-9s %6s %8s %8s %9s\n", "ID", "HOST", "ROLE",
                  "TASK", "SAMPLES", "LOSS", "LAST SEEN");
    text += line;
    std::vector<proto::LiveWorker> workers(st.workers().begin(), st.workers().end());
    std::sort(workers.begin(), workers.end(),
              [](const auto& a, const auto& b) { return a.worker_id() < b.worker_id(); });
    for (const auto& w : workers) {
      const std::string loss = w.has_loss() ? Printf("%.4f", w.loss()) : "-";
      std::snprintf(line, sizeof line, "  %4u  %-16s %-9s %6llu %8u %8s %8.1fs\n", w.worker_id(),
                    w.host().c_str(),
                    w.role() == proto::WORKER_ROLE_EVALUATOR ? "evaluator" : "trainer",
                    static_cast<unsigned long long>(w.task_id()), w.samples_done(), loss.c_str(),
                    w.seconds_since_heartbeat());
      text += line;
    }
  }
  return text;
}

int StatusCommand(const std::vector<std::string>& args) {
  std::vector<std::string> flag_args;
  std::string name;
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  // A leading NAME is the only positional argument.
  size_t first = 0;
  if (!args.empty() && !args[0].empty() && args[0][0] != '-') {
    name = args[0];
    first = 1;
  }
  flag_args.assign(args.begin() + first, args.end());
  std::string run_dir, coordinator, token_file;
  bool json = false;
  FlagSet flags;
  flags.String("--run-dir", &run_dir);
  flags.String("--coordinator", &coordinator);
  flags.String("--token-file", &token_file);
  flags.Switch("--json", &json);
  Status s = flags.Parse(flag_args);
  if (!s.ok()) return Fail(s.message() + "\n" + kUsage, 2);
  const int ways = !name.empty() + !run_dir.empty() + !coordinator.empty();
  if (ways != 1) return Fail(std::string("give one of NAME, --run-dir, --coordinator\n") + kUsage, 2);
  if (!coordinator.empty() && !IsHostPort(coordinator)) {
    return Fail("--coordinator: must be HOST:PORT, got '" + coordinator + "'", 2);
  }

  std::string address = coordinator, token;
  if (coordinator.empty()) {
    if (!name.empty()) run_dir = "runs/" + name;
    s = ReadRunEndpoints(run_dir, &address, &token);
  } else {
    s = ResolveJobToken(token_file, /*allow_none=*/true, &token);
  }
  if (!s.ok()) return Fail(s.message(), 1);

  CoordinatorClient::Options options;
  options.token = token;
  options.deadline_seconds = 5;
  CoordinatorClient client(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()),
                           options);
  proto::CoordinatorStatusResponse status;
  s = client.GetStatus(&status);
  if (!s.ok()) return Fail("coordinator " + address + ": " + s.ToString(), 1);
  if (json) {
    std::string text;
    google::protobuf::util::JsonPrintOptions print;
    print.add_whitespace = true;
    print.always_print_primitive_fields = true;
    google::protobuf::util::MessageToJsonString(status, &text, print);
    std::fputs(text.c_str(), stdout);
  } else {
    std::fputs(FormatJobStatus(status).c_str(), stdout);
  }
  return 0;
}

}  // namespace gaptrain
