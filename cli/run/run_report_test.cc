// Tests what `gaptrain run` prints: MasterTotals across a simulated master
// restart (counters that drop keep the totals seen before) and its NaN
// means before any observation; one scrape's MasterCounters; the progress
// line's content; the text and JSON summaries (the JSON parsed back, NaN
// written as null; autoscale decisions); FormatDuration and PhaseName.

#include "cli/run/run_report.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include <gtest/gtest.h>

namespace gaptrain {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A master's /metrics page with these counter values.
MetricsSample MasterPage(double applied, double accumulated, double staleness_sum,
                         double staleness_count, double gap_sum, double gap_count,
                         double version) {
  char text[1024];
  std::snprintf(text, sizeof text,
                "# TYPE gaptrain_master_pushes_total counter\n"
                "gaptrain_master_pushes_total{outcome=\"applied\"} %g\n"
                "gaptrain_master_pushes_total{outcome=\"accumulated\"} %g\n"
                "gaptrain_master_pushes_total{outcome=\"rejected\"} 1000\n"
                "gaptrain_master_staleness_sum %g\n"
                "gaptrain_master_staleness_count %g\n"
                "gaptrain_master_gap_sum %g\n"
                "gaptrain_master_gap_count %g\n"
                "gaptrain_master_model_version %g\n",
                applied, accumulated, staleness_sum, staleness_count, gap_sum, gap_count,
                version);
  return ParseMetricsText(text);
}

// ---- MasterTotals ----

TEST(MasterTotalsTest, NothingObservedYet) {
  MasterTotals totals;
  EXPECT_EQ(totals.pushes_accepted(), 0);
  EXPECT_EQ(totals.model_version(), 0u);
  EXPECT_TRUE(std::isnan(totals.mean_staleness()));
  EXPECT_TRUE(std::isnan(totals.mean_gap()));
}

TEST(MasterTotalsTest, FollowsTheCounters) {
  MasterTotals totals;
  totals.Observe(MasterPage(100, 10, 330, 110, 55, 110, 100));
  EXPECT_EQ(totals.pushes_accepted(), 110) << "applied + accumulated, not rejected";
  EXPECT_EQ(totals.model_version(), 100u);
  EXPECT_DOUBLE_EQ(totals.mean_staleness(), 3.0);
  EXPECT_DOUBLE_EQ(totals.mean_gap(), 0.5);
  totals.Observe(MasterPage(150, 10, 480, 160, 90, 160, 150));
  EXPECT_EQ(totals.pushes_accepted(), 160);
  EXPECT_EQ(totals.model_version(), 150u);
  EXPECT_DOUBLE_EQ(totals.mean_staleness(), 3.0);
  EXPECT_DOUBLE_EQ(totals.mean_gap(), 90.0 / 160);
}

TEST(MasterTotalsTest, KeepsTheTotalsAcrossAMasterRestart) {
  MasterTotals totals;
  totals.Observe(MasterPage(100, 10, 330, 110, 55, 110, 100));
  totals.Observe(MasterPage(150, 10, 480, 160, 80, 160, 150));
  // The master restarts from its checkpoint at version 140; its counters
  // start again from zero.
  totals.Observe(MasterPage(5, 0, 10, 5, 2, 5, 145));
  EXPECT_EQ(totals.pushes_accepted(), 165);
  EXPECT_EQ(totals.staleness_sum(), 490);
  EXPECT_EQ(totals.staleness_count(), 165);
  EXPECT_EQ(totals.gap_sum(), 82);
  EXPECT_EQ(totals.gap_count(), 165);
  EXPECT_EQ(totals.model_version(), 145u) << "the version is the master's, not a total";
  EXPECT_DOUBLE_EQ(totals.mean_staleness(), 490.0 / 165);
  // It goes on counting after the restart.
  totals.Observe(MasterPage(25, 5, 70, 30, 12, 30, 170));
  EXPECT_EQ(totals.pushes_accepted(), 190);
  EXPECT_EQ(totals.staleness_count(), 190);
  EXPECT_DOUBLE_EQ(totals.mean_staleness(), 550.0 / 190);
  EXPECT_DOUBLE_EQ(totals.mean_gap(), 92.0 / 190);
  // And across a second restart.
  totals.Observe(MasterPage(1, 0, 2, 1, 1, 1, 171));
  EXPECT_EQ(totals.pushes_accepted(), 191);
  EXPECT_EQ(totals.staleness_sum(), 552);
}

// spec.master.shards: the coordinator's status lists every shard's run
// totals. Shard 0 holds 3/4 of θ, shard 1 1/4; every push reaches both.
proto::CoordinatorStatusResponse TwoShards(uint64_t version, double pushes0, double gap0,
                                           double pushes1, double gap1) {
  proto::CoordinatorStatusResponse st;
  st.set_master_version(version);
  const double pushes[2] = {pushes0, pushes1}, gaps[2] = {gap0, gap1};
  for (int i = 0; i < 2; ++i) {
    proto::MasterTotals* t = st.add_masters()->mutable_totals();
    t->set_parameters(i == 0 ? 300 : 100);
    t->set_updates(static_cast<uint64_t>(pushes[i]));
    t->set_staleness_count(static_cast<uint64_t>(pushes[i]));
    t->set_staleness_sum(2 * pushes[i]);
    t->set_gap_count(static_cast<uint64_t>(pushes[i]));
    t->set_gap_sum(gaps[i] * pushes[i]);
  }
  return st;
}

TEST(MasterTotalsTest, ShardsWeightedByTheirShareAcrossOneShardsRestart) {
  MasterTotals t;
  // 100 pushes each; mean Gap 2 on 3/4 of θ, 4 on 1/4: 2.5 per parameter.
  t.ObserveShards(TwoShards(100, 100, 2.0, 100, 4.0));
  EXPECT_EQ(t.model_version(), 100u);
  EXPECT_DOUBLE_EQ(t.pushes_accepted(), 100);
  EXPECT_DOUBLE_EQ(t.mean_gap(), 2.5);
  EXPECT_DOUBLE_EQ(t.mean_staleness(), 2.0);
  const MasterCounters c = MasterCountersOfShards(TwoShards(100, 100, 2.0, 100, 4.0));
  EXPECT_DOUBLE_EQ(c.gap_sum / c.gap_count, 2.5);
  EXPECT_EQ(c.model_version, 100);
  // Shard 1 restarts: its run counts from 0 (30 pushes since); shard 0
  // goes on to 130. The run's totals keep what shard 1 did before.
  t.ObserveShards(TwoShards(95, 130, 2.0, 30, 4.0));
  EXPECT_DOUBLE_EQ(t.pushes_accepted(), 0.75 * 130 + 0.25 * (100 + 30));
  EXPECT_DOUBLE_EQ(t.mean_gap(), 2.5);
  EXPECT_EQ(t.model_version(), 95u) << "the least shard's, as the coordinator says";
  EXPECT_EQ(MasterCountersOfShards(proto::CoordinatorStatusResponse()).model_version, -1);
}

TEST(MasterTotalsTest, NoGapUnderARuleThatComputesNone) {
  MasterTotals totals;
  totals.Observe(ParseMetricsText(
      "gaptrain_master_pushes_total{outcome=\"applied\"} 20\n"
      "gaptrain_master_staleness_sum 40\n"
      "gaptrain_master_staleness_count 20\n"
      "gaptrain_master_model_version 20\n"));
  EXPECT_EQ(totals.pushes_accepted(), 20);
  EXPECT_DOUBLE_EQ(totals.mean_staleness(), 2.0);
  EXPECT_TRUE(std::isnan(totals.mean_gap()));
}

TEST(MasterTotalsTest, APageWithoutAVersionKeepsTheLastOne) {
  MasterTotals totals;
  totals.Observe(MasterPage(1, 0, 1, 1, 1, 1, 77));
  totals.Observe(ParseMetricsText("gaptrain_master_pushes_total{outcome=\"applied\"} 2\n"));
  EXPECT_EQ(totals.model_version(), 77u);
  EXPECT_EQ(totals.pushes_accepted(), 2);
}

TEST(MasterTotalsTest, NonFiniteValuesAreIgnored) {
  MasterTotals totals;
  totals.Observe(MasterPage(10, 0, 20, 10, 5, 10, 10));
  totals.Observe(ParseMetricsText(
      "gaptrain_master_staleness_sum NaN\n"
      "gaptrain_master_staleness_count +Inf\n"));
  EXPECT_EQ(totals.staleness_sum(), 20);
  EXPECT_EQ(totals.staleness_count(), 10);
}

TEST(MasterCountersTest, OneScrapeAsThePageHasIt) {
  const MasterCounters c = ReadMasterCounters(MasterPage(100, 10, 330, 110, 55, 110, 100));
  EXPECT_EQ(c.pushes_accepted, 110);
  EXPECT_EQ(c.staleness_sum, 330);
  EXPECT_EQ(c.staleness_count, 110);
  EXPECT_EQ(c.gap_sum, 55);
  EXPECT_EQ(c.gap_count, 110);
  EXPECT_EQ(c.model_version, 100);
  // A restarted master's page is read as it is, not as a total.
  const MasterCounters restarted = ReadMasterCounters(MasterPage(5, 0, 10, 5, 2, 5, 145));
  EXPECT_EQ(restarted.gap_count, 5);
  EXPECT_EQ(restarted.model_version, 145);
  const MasterCounters empty = ReadMasterCounters(ParseMetricsText(""));
  EXPECT_EQ(empty.model_version, -1);
  EXPECT_EQ(empty.gap_count, 0);
}

// ---- ProgressLine ----

proto::LiveWorker* AddWorker(proto::CoordinatorStatusResponse* st, uint32_t id,
                             proto::WorkerRole role, double loss /* NaN: none */) {
  proto::LiveWorker* w = st->add_workers();
  w->set_worker_id(id);
  w->set_host(role == proto::WORKER_ROLE_EVALUATOR ? "evaluator"
                                                   : "trainer-" + std::to_string(id));
  w->set_role(role);
  if (!std::isnan(loss)) w->set_loss(static_cast<float>(loss));
  return w;
}

ProgressInput RunningInput() {
  ProgressInput in;
  proto::CoordinatorStatusResponse& st = in.status;
  st.set_phase(proto::JOB_PHASE_RUNNING);
  st.set_epoch(1);
  st.set_epochs(3);
  st.set_progress(0.61);
  st.set_master_version(4000);
  st.set_live_trainers(4);
  st.set_last_accuracy(0.9802);
  AddWorker(&st, 1, proto::WORKER_ROLE_TRAINER, 0.080);
  AddWorker(&st, 2, proto::WORKER_ROLE_TRAINER, 0.082);
  AddWorker(&st, 3, proto::WORKER_ROLE_TRAINER, kNaN);  // no loss yet: not counted
  AddWorker(&st, 4, proto::WORKER_ROLE_EVALUATOR, 7.5);  // not a trainer: not counted
  in.elapsed_seconds = 65;
  in.master_version = 4210;
  in.updates_per_second = 62.2;
  in.recent_gap = 1.3123;
  in.trainers = 4;
  return in;
}

TEST(ProgressLineTest, RunningJob) {
  EXPECT_EQ(ProgressLine(RunningInput()),
            "[1m05s] epoch 2/3 61% | v4210 62 upd/s | loss 0.081 | acc 98.02% | gap 1.31 | "
            "trainers 4/4");
}

TEST(ProgressLineTest, TheTargetMetricAfterTheAccuracy) {
  ProgressInput in = RunningInput();
  in.target.metric = "top5_accuracy";
  in.target.at_least = 0.95;
  // Not reported yet: nothing to show.
  EXPECT_FALSE(Contains(ProgressLine(in), "top5")) << ProgressLine(in);
  proto::EvalMetric* top5 = in.status.add_last_eval_metrics();
  top5->set_name("top5_accuracy");
  top5->set_value(0.93124);
  EXPECT_TRUE(Contains(ProgressLine(in), "| acc 98.02% | top5_accuracy 0.9312 (>= 0.95) | gap"))
      << ProgressLine(in);
  // An accuracy target is the acc column already.
  in.target.metric = "accuracy";
  EXPECT_FALSE(Contains(ProgressLine(in), "(>= 0.95)")) << ProgressLine(in);
  in.target.metric = "loss";
  in.target.at_least = kNaN;
  in.target.at_most = 0.05;
  in.status.set_last_eval_loss(0.0625);
  EXPECT_TRUE(Contains(ProgressLine(in), "| loss 0.0625 (<= 0.05) |")) << ProgressLine(in);
}

TEST(ProgressLineTest, VersionIsTheLargerOfTheTwoSources) {
  ProgressInput in = RunningInput();
  in.status.set_master_version(5000);
  EXPECT_TRUE(Contains(ProgressLine(in), " v5000 ")) << ProgressLine(in);
  in.master_version = 0;  // the master's metrics are not read yet
  EXPECT_TRUE(Contains(ProgressLine(in), " v5000 ")) << ProgressLine(in);
  in.status.set_master_version(0);
  in.master_version = 12;
  EXPECT_TRUE(Contains(ProgressLine(in), " v12 ")) << ProgressLine(in);
}

TEST(ProgressLineTest, LeavesOutWhatIsNotKnown) {
  ProgressInput in = RunningInput();
  in.status.clear_last_accuracy();
  in.status.clear_workers();
  in.recent_gap = kNaN;
  const std::string line = ProgressLine(in);
  EXPECT_EQ(line, "[1m05s] epoch 2/3 61% | v4210 62 upd/s | trainers 4/4");
}

TEST(ProgressLineTest, TrainersDownMasterDownAndChaos) {
  ProgressInput in = RunningInput();
  in.status.set_live_trainers(2);
  in.master_reachable = false;
  in.chaos_kills = 3;
  const std::string line = ProgressLine(in);
  EXPECT_TRUE(Contains(line, "| trainers 2/4 | master down | chaos kills 3")) << line;
  EXPECT_EQ(line.rfind("chaos kills 3"), line.size() - std::string("chaos kills 3").size());
}

// A SIGKILLed trainer keeps its lease until it expires; its replacement
// registers meanwhile. The line counts the silent one apart, not as a
// fifth of four trainers.
TEST(ProgressLineTest, SilentTrainersAreShownApart) {
  ProgressInput in = RunningInput();
  in.lease_seconds = 10;
  in.status.set_live_trainers(5);
  AddWorker(&in.status, 5, proto::WORKER_ROLE_TRAINER, kNaN)->set_seconds_since_heartbeat(6);
  AddWorker(&in.status, 6, proto::WORKER_ROLE_TRAINER, kNaN)->set_seconds_since_heartbeat(4);
  EXPECT_TRUE(Contains(ProgressLine(in), "| trainers 4/4 (+1 silent)")) << ProgressLine(in);
  in.lease_seconds = 0;  // unknown: every live trainer counts
  EXPECT_TRUE(Contains(ProgressLine(in), "| trainers 5/4")) << ProgressLine(in);
  EXPECT_FALSE(Contains(ProgressLine(in), "silent")) << ProgressLine(in);
}

TEST(ProgressLineTest, AutoscaledJobShowsItsRange) {
  ProgressInput in = RunningInput();
  in.status.set_live_trainers(1);
  in.trainers = 2;  // the autoscaler's N
  in.autoscale_floor = 1;
  in.autoscale_ceiling = 4;
  EXPECT_TRUE(Contains(ProgressLine(in), "| trainers 1/2 (autoscale 1-4)")) << ProgressLine(in);
  EXPECT_FALSE(Contains(ProgressLine(RunningInput()), "autoscale")) << ProgressLine(in);
}

TEST(ProgressLineTest, NoChaosNoMention) {
  const std::string line = ProgressLine(RunningInput());
  EXPECT_FALSE(Contains(line, "chaos")) << line;
  EXPECT_FALSE(Contains(line, "master down")) << line;
}

TEST(ProgressLineTest, CoordinatorUnreachable) {
  ProgressInput in = RunningInput();
  in.coordinator_reachable = false;
  in.elapsed_seconds = 5;
  EXPECT_EQ(ProgressLine(in), "[5s] waiting for the coordinator...");
}

TEST(ProgressLineTest, PhaseShownUnlessRunning) {
  ProgressInput in = RunningInput();
  in.status.set_phase(proto::JOB_PHASE_SUCCEEDED);
  in.status.set_epoch(2);
  in.status.set_progress(1);
  EXPECT_TRUE(Contains(ProgressLine(in), "] Succeeded epoch 3/3 100% |")) << ProgressLine(in);
  in.status.set_phase(proto::JOB_PHASE_PENDING);
  EXPECT_TRUE(Contains(ProgressLine(in), "] Pending epoch")) << ProgressLine(in);
  EXPECT_FALSE(Contains(ProgressLine(RunningInput()), "Running"));
}

TEST(ProgressLineTest, EpochCount) {
  ProgressInput in = RunningInput();
  in.status.set_epochs(2.5);  // a fractional job length: its last epoch is the third
  EXPECT_TRUE(Contains(ProgressLine(in), "epoch 2/3 ")) << ProgressLine(in);
  in.status.set_epochs(0);  // maxUpdates: no count of epochs
  in.status.set_epoch(0);
  EXPECT_TRUE(Contains(ProgressLine(in), "] epoch 1 61% |")) << ProgressLine(in);
}

// ---- SummaryText, SummaryJson ----

RunSummary FullSummary() {
  RunSummary s;
  s.job_name = "mnist-ga";
  s.outcome = "Succeeded";
  s.reason = "EpochsCompleted";
  s.message = "3 epochs completed";
  s.seconds = 125;
  s.has_accuracy = true;
  s.accuracy = 0.9812;
  s.eval_loss = 0.06128;
  s.eval_version = 9000;
  s.version = 9100;
  s.pushes_accepted = 10000;
  s.mean_staleness = 3.456;
  s.mean_gap = 1.2344;
  s.joined = 6;
  s.preempted = 2;
  s.lease_expiries = 1;
  s.failed = 0;
  s.tasks_reassigned = 3;
  s.tasks_released = 2;
  s.chaos_sigterms = 2;
  s.chaos_sigkills = 1;
  s.master_restarts = 1;
  s.worker_restarts = 0;
  s.checkpoint = "runs/mnist-ga/checkpoints/ckpt-9100";
  s.run_dir = "runs/mnist-ga";
  return s;
}

TEST(SummaryTextTest, FullRun) {
  EXPECT_EQ(SummaryText(FullSummary()),
            "job mnist-ga: Succeeded (EpochsCompleted) after 2m05s\n"
            "  3 epochs completed\n"
            "  test accuracy 98.12% (loss 0.0613) at version 9000\n"
            "  9100 updates, 10000 pushes (80.0/s), mean staleness 3.46, mean Gap 1.234\n"
            "  workers: 6 joins, 2 preempted, 1 lost (lease expired), 0 failed; 3 tasks "
            "reassigned, 2 handed back (data unavailable)\n"
            "  survived: 2 SIGTERM and 1 SIGKILL of trainers, 1 master restart(s), 0 worker "
            "crash restart(s)\n"
            "  checkpoint: runs/mnist-ga/checkpoints/ckpt-9100\n"
            "  export: gaptrain export --run-dir runs/mnist-ga -o model.pt\n"
            "  logs, state and summary.json: runs/mnist-ga\n");
}

TEST(SummaryTextTest, TheUsersMetricsAndTheTarget) {
  RunSummary s = FullSummary();
  s.reason = "TargetReached";
  proto::EvalMetric m;
  m.set_name("top5_accuracy");
  m.set_value(0.99531);
  s.eval_metrics.push_back(m);
  m.set_name("f1");
  m.set_value(0.5);
  s.eval_metrics.push_back(m);
  s.target = "top5_accuracy >= 0.995";
  const std::string text = SummaryText(s);
  EXPECT_TRUE(Contains(text, "at version 9000\n  metrics: top5_accuracy 0.9953, f1 0.5\n"
                             "  target: top5_accuracy >= 0.995\n"))
      << text;
  const nlohmann::json j = nlohmann::json::parse(SummaryJson(s));
  EXPECT_EQ(j["evalMetrics"], nlohmann::json::parse(R"({"top5_accuracy": 0.99531, "f1": 0.5})"));
  EXPECT_EQ(j["target"], "top5_accuracy >= 0.995");
}

TEST(SummaryTextTest, InterruptedRunWithoutEvaluationOrFaults) {
  RunSummary s = FullSummary();
  s.outcome = "Interrupted";
  s.reason = "";
  s.message = "";
  s.seconds = 0;
  s.has_accuracy = false;
  s.mean_staleness = kNaN;
  s.mean_gap = kNaN;
  s.chaos_sigterms = s.chaos_sigkills = s.master_restarts = s.worker_restarts = 0;
  s.checkpoint = "";
  const std::string text = SummaryText(s);
  EXPECT_TRUE(Contains(text, "job mnist-ga: Interrupted after 0s\n")) << text;
  EXPECT_TRUE(Contains(text, "  test accuracy: not evaluated\n")) << text;
  EXPECT_TRUE(Contains(text, "  9100 updates, 10000 pushes\n")) << text;
  EXPECT_FALSE(Contains(text, "staleness")) << text;
  EXPECT_FALSE(Contains(text, "Gap")) << text;
  EXPECT_FALSE(Contains(text, "survived")) << text;
  EXPECT_FALSE(Contains(text, "/s)")) << "no rate without a duration: " << text;
  EXPECT_TRUE(Contains(text, "  checkpoint: none\n")) << text;
  EXPECT_FALSE(Contains(text, "gaptrain export")) << "nothing to export: " << text;
}

TEST(SummaryTextTest, WorkerCrashRestartsAloneAreReported) {
  RunSummary s = FullSummary();
  s.chaos_sigterms = s.chaos_sigkills = s.master_restarts = 0;
  s.worker_restarts = 2;
  EXPECT_TRUE(Contains(SummaryText(s), "2 worker crash restart(s)")) << SummaryText(s);
}

// The README job's dead model (docs/run.md): the summary says what it
// means and which field to change.
TEST(SummaryTextTest, AModelAtChanceLevelGetsAdvice) {
  RunSummary s = FullSummary();
  s.accuracy = 0.1135;
  s.eval_loss = 2.3029;
  s.eval_version = 3752;
  const std::string text = SummaryText(s);
  EXPECT_TRUE(Contains(text, "  test accuracy 11.35% (loss 2.3029) at version 3752\n  the model "
                             "predicts no better than chance"))
      << text;
  EXPECT_TRUE(Contains(text, "lower spec.training.optimizer.learningRate")) << text;
  // A trained model, and a model evaluated before any update, get none.
  EXPECT_FALSE(Contains(SummaryText(FullSummary()), "chance")) << SummaryText(FullSummary());
  s.eval_version = 0;
  EXPECT_FALSE(Contains(SummaryText(s), "chance")) << SummaryText(s);
}

RunSummary AutoscaledSummary() {
  RunSummary s = FullSummary();
  s.autoscaled = true;
  s.autoscale_floor = 1;
  s.autoscale_ceiling = 4;
  s.trainers_at_end = 4;
  s.max_live_trainers = 4;
  s.autoscale_changes = {{4.2, "ScaledUp", 1, 2, "Gap 1.00 leaves room: 1 -> 2 trainers"},
                         {9.5, "ScaledUp", 2, 4, "Gap 1.20 leaves room: 2 -> 4 trainers"}};
  return s;
}

TEST(SummaryTextTest, AutoscaleDecisionsWithTheirTimes) {
  const std::string text = SummaryText(AutoscaledSummary());
  EXPECT_TRUE(Contains(text,
                       "  autoscale: 1 -> 4 trainers in 2 decision(s) (range 1-4), at most 4 live "
                       "at once\n"
                       "    [4s] ScaledUp: Gap 1.00 leaves room: 1 -> 2 trainers\n"
                       "    [10s] ScaledUp: Gap 1.20 leaves room: 2 -> 4 trainers\n"))
      << text;
  RunSummary held = AutoscaledSummary();
  held.autoscale_changes.clear();
  held.trainers_at_end = 1;
  held.max_live_trainers = 1;
  EXPECT_TRUE(Contains(SummaryText(held),
                       "  autoscale: stayed at 1 trainers (range 1-4), at most 1 live at once\n"))
      << SummaryText(held);
  EXPECT_FALSE(Contains(SummaryText(FullSummary()), "autoscale")) << SummaryText(FullSummary());
}

TEST(SummaryJsonTest, AutoscaleDecisions) {
  const nlohmann::json j = nlohmann::json::parse(SummaryJson(AutoscaledSummary()));
  const nlohmann::json& a = j["autoscale"];
  EXPECT_EQ(a["minReplicas"].get<uint32_t>(), 1u);
  EXPECT_EQ(a["maxReplicas"].get<uint32_t>(), 4u);
  EXPECT_EQ(a["trainers"].get<uint32_t>(), 4u);
  EXPECT_EQ(a["maxLiveTrainers"].get<uint32_t>(), 4u);
  ASSERT_EQ(a["decisions"].size(), 2u) << j.dump(2);
  EXPECT_EQ(a["decisions"][0]["atSeconds"].get<double>(), 4.2);
  EXPECT_EQ(a["decisions"][0]["reason"], "ScaledUp");
  EXPECT_EQ(a["decisions"][0]["from"].get<uint32_t>(), 1u);
  EXPECT_EQ(a["decisions"][0]["to"].get<uint32_t>(), 2u);
  EXPECT_EQ(a["decisions"][0]["message"], "Gap 1.00 leaves room: 1 -> 2 trainers");
  EXPECT_EQ(a["decisions"][1]["from"].get<uint32_t>(), 2u);
  EXPECT_EQ(a["decisions"][1]["to"].get<uint32_t>(), 4u);
  EXPECT_TRUE(nlohmann::json::parse(SummaryJson(FullSummary()))["autoscale"].is_null());
}

TEST(SummaryJsonTest, Fields) {
  const std::string text = SummaryJson(FullSummary());
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  const nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_EQ(j["jobName"], "mnist-ga");
  EXPECT_EQ(j["outcome"], "Succeeded");
  EXPECT_EQ(j["reason"], "EpochsCompleted");
  EXPECT_EQ(j["message"], "3 epochs completed");
  EXPECT_EQ(j["seconds"].get<double>(), 125);
  EXPECT_DOUBLE_EQ(j["accuracy"].get<double>(), 0.9812);
  EXPECT_DOUBLE_EQ(j["evalLoss"].get<double>(), 0.06128);
  EXPECT_EQ(j["evalVersion"].get<uint64_t>(), 9000u);
  EXPECT_EQ(j["version"].get<uint64_t>(), 9100u);
  EXPECT_EQ(j["pushesAccepted"].get<double>(), 10000);
  EXPECT_DOUBLE_EQ(j["meanStaleness"].get<double>(), 3.456);
  EXPECT_DOUBLE_EQ(j["meanGap"].get<double>(), 1.2344);
  EXPECT_EQ(j["workers"]["joined"].get<uint64_t>(), 6u);
  EXPECT_EQ(j["workers"]["preempted"].get<uint64_t>(), 2u);
  EXPECT_EQ(j["workers"]["leaseExpiries"].get<uint64_t>(), 1u);
  EXPECT_EQ(j["workers"]["failed"].get<uint64_t>(), 0u);
  EXPECT_EQ(j["workers"]["tasksReassigned"].get<uint64_t>(), 3u);
  EXPECT_EQ(j["workers"]["tasksReleased"].get<uint64_t>(), 2u);
  EXPECT_EQ(j["chaos"]["trainerSigterms"].get<uint64_t>(), 2u);
  EXPECT_EQ(j["chaos"]["trainerSigkills"].get<uint64_t>(), 1u);
  EXPECT_EQ(j["chaos"]["masterRestarts"].get<uint64_t>(), 1u);
  EXPECT_EQ(j["workerRestarts"].get<uint64_t>(), 0u);
  EXPECT_EQ(j["checkpoint"], "runs/mnist-ga/checkpoints/ckpt-9100");
  EXPECT_EQ(j["runDir"], "runs/mnist-ga");
  EXPECT_TRUE(j["chaos"]["startedAtSeconds"].is_null()) << "no trainer registered";
  EXPECT_TRUE(j["chaos"]["faults"].empty());
  EXPECT_TRUE(j["ledger"].is_null());
  EXPECT_EQ(j["retrained"]["tasks"].get<uint64_t>(), 0u);
  EXPECT_EQ(j["evalMetrics"], nlohmann::json::object());
  EXPECT_TRUE(j["target"].is_null());
}

// Each fault with its time, the ledger's accounting and the work retrained.
TEST(SummaryJsonTest, ChaosFaultsLedgerAndRetraining) {
  RunSummary s = FullSummary();
  s.chaos_started_at = 3.5;
  s.chaos_faults = {{7.5, "SIGTERM", "trainer-2"}, {9.5, "restart", "trainer-2"},
                    {15.25, "SIGKILL", "master"}};
  s.has_ledger = true;
  s.ledger_pushes = 10010;
  s.ledger_rejected = 10;
  s.ledger_updates = 10000;
  s.ledger_updates_lost = 900;
  s.ledger_restores = 1;
  s.tasks_retrained = 4;
  s.samples_retrained = 57600;
  const nlohmann::json j = nlohmann::json::parse(SummaryJson(s));
  EXPECT_EQ(j["chaos"]["startedAtSeconds"].get<double>(), 3.5);
  const nlohmann::json& faults = j["chaos"]["faults"];
  ASSERT_EQ(faults.size(), 3u) << j.dump(2);
  EXPECT_EQ(faults[0]["atSeconds"].get<double>(), 7.5);
  EXPECT_EQ(faults[0]["fault"], "SIGTERM");
  EXPECT_EQ(faults[0]["target"], "trainer-2");
  EXPECT_EQ(faults[1]["fault"], "restart");
  EXPECT_EQ(faults[2]["atSeconds"].get<double>(), 15.25);
  EXPECT_EQ(faults[2]["target"], "master");
  EXPECT_EQ(j["ledger"]["pushes"].get<uint64_t>(), 10010u);
  EXPECT_EQ(j["ledger"]["rejected"].get<uint64_t>(), 10u);
  EXPECT_EQ(j["ledger"]["updates"].get<uint64_t>(), 10000u);
  EXPECT_EQ(j["ledger"]["updatesLost"].get<uint64_t>(), 900u);
  EXPECT_EQ(j["ledger"]["restores"].get<uint64_t>(), 1u);
  EXPECT_EQ(j["retrained"]["tasks"].get<uint64_t>(), 4u);
  EXPECT_EQ(j["retrained"]["samples"].get<uint64_t>(), 57600u);
  EXPECT_TRUE(Contains(SummaryText(s),
                       "  master restores lost 900 updates; 4 tasks (57600 samples) trained again\n"))
      << SummaryText(s);
}

TEST(SummaryJsonTest, NaNAndMissingAccuracyAreNull) {
  RunSummary s = FullSummary();
  s.mean_staleness = kNaN;
  s.mean_gap = std::numeric_limits<double>::infinity();
  const nlohmann::json with_accuracy = nlohmann::json::parse(SummaryJson(s));
  EXPECT_TRUE(with_accuracy["meanStaleness"].is_null());
  EXPECT_TRUE(with_accuracy["meanGap"].is_null());
  EXPECT_TRUE(with_accuracy["accuracy"].is_number());

  s.has_accuracy = false;
  const nlohmann::json without = nlohmann::json::parse(SummaryJson(s));
  EXPECT_TRUE(without["accuracy"].is_null());
  EXPECT_TRUE(without["evalLoss"].is_null());

  s.has_accuracy = true;
  s.accuracy = kNaN;  // an evaluation of a diverged model
  EXPECT_TRUE(nlohmann::json::parse(SummaryJson(s))["accuracy"].is_null());
}

// ---- FormatDuration, PhaseName ----

TEST(FormatDurationTest, Ranges) {
  EXPECT_EQ(FormatDuration(0), "0s");
  EXPECT_EQ(FormatDuration(-5), "0s");
  EXPECT_EQ(FormatDuration(0.4), "0s");
  EXPECT_EQ(FormatDuration(42), "42s");
  EXPECT_EQ(FormatDuration(59.4), "59s");
  EXPECT_EQ(FormatDuration(59.6), "1m00s");
  EXPECT_EQ(FormatDuration(65), "1m05s");
  EXPECT_EQ(FormatDuration(3599), "59m59s");
  EXPECT_EQ(FormatDuration(3600), "1h00m");
  EXPECT_EQ(FormatDuration(2 * 3600 + 3 * 60 + 59), "2h03m");
  EXPECT_EQ(FormatDuration(100 * 3600), "100h00m");
}

TEST(PhaseNameTest, EveryPhase) {
  EXPECT_EQ(PhaseName(proto::JOB_PHASE_PENDING), "Pending");
  EXPECT_EQ(PhaseName(proto::JOB_PHASE_RUNNING), "Running");
  EXPECT_EQ(PhaseName(proto::JOB_PHASE_SUCCEEDED), "Succeeded");
  EXPECT_EQ(PhaseName(proto::JOB_PHASE_FAILED), "Failed");
  EXPECT_EQ(PhaseName(proto::JOB_PHASE_UNSPECIFIED), "Unknown");
}

}  // namespace
}  // namespace gaptrain
