// Differential tests of every update rule: UpdateEngine against the plain
// reference implementations in rule_reference.h, over random sequences of
// pulls, pushes (with real staleness), leaves and joins, plus small
// hand-checked cases.

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "services/engine/apply_stats.h"
#include "services/engine/learning_rate_schedule.h"
#include "services/engine/parameter_layout.h"
#include "services/engine/rules/dana_slim_worker.h"
#include "services/engine/rules/kernel_util.h"
#include "services/engine/rules/rule_config.h"
#include "services/engine/rules/rule_reference.h"
#include "services/engine/update_engine.h"
#include "services/numeric/bfloat16.h"

namespace gaptrain {
namespace {

namespace ref = ::gaptrain::testing;
using ref::Vec;
using Outcome = ApplyStats::Outcome;

// ------------------------------------------------------------ fixtures

// Three tensors, 997 parameters, odd sizes so thread ranges and tensor cuts
// do not line up.
ParameterLayout TestLayout() {
  ParameterLayout layout;
  EXPECT_TRUE(layout.Add("enc.weight", {24, 25}).ok());  // 600
  EXPECT_TRUE(layout.Add("enc.bias", {7}).ok());         // 7
  EXPECT_TRUE(layout.Add("dec.weight", {13, 30}).ok());  // 390
  return layout;
}

std::vector<ref::RefRange> Ranges(const ParameterLayout& layout) {
  std::vector<ref::RefRange> out;
  for (const TensorSpec& t : layout.tensors()) out.push_back({t.offset, t.offset + t.size});
  return out;
}

ref::RefSchedule ToRef(const ScheduleConfig& c) {
  ref::RefSchedule s;
  s.lr = c.learning_rate;
  s.warmup_updates = c.warmup_updates;
  s.warmup_start_factor = c.warmup_start_factor;
  s.decay_at_fractions = c.decay_at_fractions;
  s.decay_factor = c.decay_factor;
  s.total_updates = c.total_updates;
  return s;
}

Vec RandomVec(std::mt19937* rng, size_t n, float stddev) {
  std::normal_distribution<float> normal(0.0f, stddev);
  Vec v(n);
  for (float& x : v) x = normal(*rng);
  return v;
}

std::unique_ptr<UpdateEngine> MakeEngine(const ParameterLayout& layout, const RuleConfig& rule,
                                         const ScheduleConfig& schedule, const Vec& theta0) {
  UpdateEngine::Options options;
  options.rule = rule;
  options.schedule = schedule;
  std::unique_ptr<UpdateEngine> engine;
  Status s = UpdateEngine::Create(layout, options, &engine);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok() || engine == nullptr) return nullptr;
  EXPECT_EQ(engine->store().size(), theta0.size());
  std::copy(theta0.begin(), theta0.end(), engine->mutable_store()->params());
  return engine;
}

std::unique_ptr<ref::RefRule> MakeReference(const RuleConfig& c, const ParameterLayout& layout,
                                            const Vec& theta0) {
  switch (c.kind) {
    case RuleKind::kAsgd:
      return std::make_unique<ref::AsgdRef>(theta0, c.momentum, c.nesterov, c.weight_decay);
    case RuleKind::kStalenessAware:
      return std::make_unique<ref::StalenessAwareRef>(theta0, c.momentum, c.nesterov,
                                                      c.weight_decay);
    case RuleKind::kGapAware:
      return std::make_unique<ref::GapAwareRef>(theta0, c.momentum, c.nesterov, c.weight_decay,
                                                c.penalize_weight_decay, c.gap_beta,
                                                c.gap_epsilon, Ranges(layout));
    case RuleKind::kDanaZero:
      return std::make_unique<ref::DanaZeroRef>(theta0, c.momentum, c.weight_decay);
    case RuleKind::kDanaSlim:
      return std::make_unique<ref::DanaSlimRef>(theta0);
    case RuleKind::kGapAwareDana:
      return std::make_unique<ref::GapAwareDanaRef>(theta0, c.momentum, c.weight_decay,
                                                    c.penalize_weight_decay, c.gap_beta,
                                                    c.gap_epsilon, Ranges(layout));
    case RuleKind::kDcAsgd:
      return std::make_unique<ref::DcAsgdRef>(theta0, c.momentum, c.nesterov, c.weight_decay,
                                              c.dc_lambda, c.dc_adaptive,
                                              c.dc_mean_square_decay, c.dc_epsilon);
    case RuleKind::kSync:
      return std::make_unique<ref::SyncRef>(theta0, c.momentum, c.nesterov, c.weight_decay,
                                            c.backup_workers);
  }
  return nullptr;
}

bool IsGapRule(RuleKind k) { return k == RuleKind::kGapAware || k == RuleKind::kGapAwareDana; }

// Parameter tolerances. The engine and the reference do the same float32
// arithmetic in a slightly different order, so they agree to a few ulps per
// step. The Gap rules get a larger absolute tolerance: C depends on the
// rounding of β (the engine feeds r with float β and 1 − β but
// bias-corrects with double β, a 1.3e-5 relative difference in r̂ for
// β = 0.999). A wrong formula is off by orders of magnitude more (a step
// is ~1e-2).
constexpr double kRtol = 1e-5;
constexpr double kAtol = 1e-6;
constexpr double kGapAtol = 3e-6;

// |a − e| <= rtol·max(|a|, |e|) + atol for every element.
::testing::AssertionResult VecNear(const float* actual, const Vec& expected, double rtol,
                                   double atol) {
  size_t bad = 0;
  std::ostringstream msg;
  double worst = 0.0;
  for (size_t j = 0; j < expected.size(); ++j) {
    const double a = actual[j], e = expected[j];
    const double err = std::fabs(a - e);
    const double tol = rtol * std::max(std::fabs(a), std::fabs(e)) + atol;
    if (!(err <= tol)) {
      if (bad < 5) msg << "\n  [" << j << "] actual " << a << " expected " << e << " diff " << err;
      ++bad;
      worst = std::max(worst, err);
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << expected.size() << " elements differ (worst " << worst << ")"
         << msg.str();
}

::testing::AssertionResult Near(double actual, double expected, double rtol, double atol) {
  const double tol = rtol * std::max(std::fabs(actual), std::fabs(expected)) + atol;
  if (std::fabs(actual - expected) <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "actual " << actual << " expected " << expected << " (tolerance " << tol << ")";
}

::testing::AssertionResult GapStatsNear(const GapStats& a, const ref::RefGapStats& e,
                                        size_t count) {
  auto r = Near(a.gap_mean, e.gap_mean, 1e-4, 1e-6);
  if (!r) return r << " (gap_mean)";
  r = Near(a.gap_max, e.gap_max, 1e-4, 1e-6);
  if (!r) return r << " (gap_max)";
  r = Near(a.penalty_mean, e.penalty_mean, 1e-4, 1e-6);
  if (!r) return r << " (penalty_mean)";
  // Elements sitting on the G = 2 boundary may go either way.
  r = Near(a.penalised_fraction, e.penalised_fraction, 0.0,
           (static_cast<double>(e.near_threshold) + 1.01) / static_cast<double>(count));
  if (!r) return r << " (penalised_fraction)";
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult SameGapStats(const GapStats& a, const GapStats& b) {
  if (a.gap_mean == b.gap_mean && a.gap_max == b.gap_max && a.penalty_mean == b.penalty_mean &&
      a.penalised_fraction == b.penalised_fraction) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "gap_mean " << a.gap_mean << " vs " << b.gap_mean << ", gap_max " << a.gap_max
         << " vs " << b.gap_max << ", penalty_mean " << a.penalty_mean << " vs "
         << b.penalty_mean << ", penalised_fraction " << a.penalised_fraction << " vs "
         << b.penalised_fraction;
}

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kApplied: return "applied";
    case Outcome::kAccumulated: return "accumulated";
    case Outcome::kDiscardedLate: return "discarded_late";
  }
  return "?";
}

// ------------------------------------------------- random event harness

struct RuleCase {
  std::string name;
  RuleConfig rule;
  ScheduleConfig schedule;
  DType echo_dtype = DType::kFloat32;  // what echo-mode workers send
  int initial_workers = 5;
  int events = 200;
  uint32_t seed = 1;
};

std::ostream& operator<<(std::ostream& os, const RuleCase& c) { return os << c.name; }

class Harness {
 public:
  explicit Harness(const RuleCase& c)
      : case_(c),
        layout_(TestLayout()),
        p_(layout_.size()),
        rng_(c.seed),
        schedule_(ToRef(c.schedule)),
        atol_(IsGapRule(c.rule.kind) ? kGapAtol : kAtol) {
    theta0_ = RandomVec(&rng_, p_, 0.5f);
    engine_ = MakeEngine(layout_, c.rule, c.schedule, theta0_);
    reference_ = MakeReference(c.rule, layout_, theta0_);
  }

  bool ok() const { return engine_ != nullptr && reference_ != nullptr; }

  bool snapshot_copy() const {
    return case_.rule.NeedsWorkerCopy() && case_.rule.gap_source == GapSource::kSnapshot;
  }
  bool echo_copy() const {
    return case_.rule.NeedsWorkerCopy() && case_.rule.gap_source == GapSource::kEcho;
  }
  bool is_sync() const { return case_.rule.kind == RuleKind::kSync; }

  // Expected store.MemoryBytes(): θ, the rule's P-sized state, and the
  // per-worker snapshots (fp32 or bf16) when the engine keeps them.
  size_t ExpectedMemory() const {
    size_t bytes = 4 * p_ + 4 * reference_->StateFloats();
    if (snapshot_copy()) {
      const size_t each = case_.rule.gap_precision == GapPrecision::kBfloat16 ? 2 : 4;
      bytes += workers_.size() * p_ * each;
    }
    return bytes;
  }

  void Join(uint32_t w) {
    ASSERT_TRUE(engine_->Join(w).ok());
    reference_->Join(w);
    workers_[w] = Worker();
    workers_[w].slim.momentum = case_.rule.momentum;
  }

  void Pull(uint32_t w) {
    Worker& worker = workers_.at(w);
    Vec out(p_, -123.0f);
    uint64_t got_version = 999999;
    Status s = engine_->Pull(w, out.data(), out.size(), &got_version);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(got_version, version_);
    const Vec expected = reference_->Reply(w, schedule_.At(version_));
    ASSERT_TRUE(VecNear(out.data(), expected, kRtol, atol_)) << "pull by worker " << w;
    worker.pulled = true;
    worker.base = got_version;
    worker.point = out;
    // What the master keeps (snapshot) or the worker sends back (echo), as
    // the master will read it.
    const bool bf16 = snapshot_copy() ? case_.rule.gap_precision == GapPrecision::kBfloat16
                                      : case_.echo_dtype == DType::kBfloat16;
    worker.copy = bf16 ? ref::RefRoundBf16(out) : out;
    worker.copy_is_bf16 = bf16;
    if (echo_copy()) {
      worker.echo_f32 = out;
      worker.echo_bf16.resize(p_);
      FloatsToBf16(out.data(), p_, worker.echo_bf16.data());
    }
    ++pulls_;
  }

  void Push(uint32_t w) {
    Worker& worker = workers_.at(w);
    Vec g = RandomVec(&rng_, p_, 1.0f);
    if (case_.rule.kind == RuleKind::kDanaSlim) {
      // The worker adds λx and sends u = g + γv from its own momentum.
      for (size_t j = 0; j < p_; ++j) g[j] += case_.rule.weight_decay * worker.point[j];
      g = worker.slim.MakeUpdate(g);
    }
    const uint64_t tau = version_ - worker.base;
    const double lr = schedule_.At(version_);

    PushRequest req;
    req.worker = w;
    req.base_version = worker.base;
    req.gradient = GradientView(g.data(), g.size());
    if (echo_copy()) {
      req.echo.dtype = case_.echo_dtype;
      req.echo.data = case_.echo_dtype == DType::kBfloat16
                          ? static_cast<const void*>(worker.echo_bf16.data())
                          : static_cast<const void*>(worker.echo_f32.data());
      req.echo_size = p_;
    }

    const uint64_t applied_before = engine_->applied();
    const uint64_t stale_before = engine_->rejected(RejectReason::kTooStale);
    const uint64_t dup_before = engine_->rejected(RejectReason::kDuplicate);
    const uint64_t late_before = engine_->discarded_late();

    ApplyStats stats;
    Status s = engine_->Push(req, &stats);

    const uint64_t max_stale = case_.rule.max_staleness;
    if (!is_sync() && max_stale > 0 && tau > max_stale) {
      EXPECT_FALSE(s.ok()) << "tau " << tau;
      EXPECT_EQ(engine_->rejected(RejectReason::kTooStale), stale_before + 1);
      ASSERT_EQ(engine_->version(), version_);
      ASSERT_TRUE(VecNear(engine_->store().params(), reference_->theta, kRtol, atol_));
      ++rejected_;
      return;
    }

    ref::RefPush rp;
    rp.worker = w;
    rp.gradient = &g;
    rp.copy = &worker.copy;
    rp.copy_is_bf16 = worker.copy_is_bf16;
    rp.staleness = tau;
    rp.learning_rate = lr;
    rp.live_workers = workers_.size();
    const ref::RefStats expected = reference_->Push(rp);

    std::ostringstream where;
    where << case_.name << ": push #" << pushes_ << " by worker " << w << " tau " << tau
          << " at version " << version_;
    const std::string at = where.str();

    if (expected.outcome == ref::RefStats::Outcome::kDuplicate) {
      EXPECT_FALSE(s.ok()) << at;
      EXPECT_EQ(engine_->rejected(RejectReason::kDuplicate), dup_before + 1) << at;
      ASSERT_EQ(engine_->version(), version_) << at;
      ++rejected_;
      return;
    }
    ASSERT_TRUE(s.ok()) << at << ": " << s.ToString();
    ++pushes_;
    ++staleness_histogram_[tau];

    EXPECT_EQ(stats.staleness, tau) << at;
    switch (expected.outcome) {
      case ref::RefStats::Outcome::kApplied:
        ASSERT_EQ(stats.outcome, Outcome::kApplied) << at << " got " << OutcomeName(stats.outcome);
        ++version_;
        ++applied_;
        if (!is_sync()) {
          EXPECT_EQ(engine_->applied(), applied_before + 1) << at;
        }
        break;
      case ref::RefStats::Outcome::kAccumulated:
        ASSERT_EQ(stats.outcome, Outcome::kAccumulated)
            << at << " got " << OutcomeName(stats.outcome);
        ++accumulated_;
        break;
      case ref::RefStats::Outcome::kDiscardedLate:
        ASSERT_EQ(stats.outcome, Outcome::kDiscardedLate)
            << at << " got " << OutcomeName(stats.outcome);
        EXPECT_EQ(engine_->discarded_late(), late_before + 1) << at;
        ++discarded_;
        break;
      default:
        break;
    }
    ASSERT_EQ(engine_->version(), version_) << at;
    CheckStats(stats, expected, at);
    ASSERT_TRUE(VecNear(engine_->store().params(), reference_->theta, kRtol, atol_)) << at;
    if (IsGapRule(case_.rule.kind)) ResyncTheta();
  }

  // G = 1 + |θ − θ⁽ⁱ⁾| / C is ill-conditioned in θ where C is tiny: an ulp
  // of difference between the engine's θ and the reference's θ becomes a
  // visible difference in G. So for the Gap rules, once a step has been
  // checked, the reference continues from the engine's θ (its own v, r, S
  // and k still evolve independently). Every step is then checked from the
  // same θ and the same worker copy.
  void ResyncTheta() {
    const float* p = engine_->store().params();
    reference_->theta.assign(p, p + p_);
  }

  void CheckStats(const ApplyStats& stats, const ref::RefStats& expected, const std::string& at) {
    EXPECT_TRUE(Near(stats.learning_rate, expected.learning_rate, 1e-9, 0.0))
        << at << " (learning_rate)";
    if (is_sync()) {
      if (expected.outcome == ref::RefStats::Outcome::kApplied) {
        EXPECT_EQ(stats.aggregated, expected.aggregated) << at;
      }
    }
    if (expected.outcome != ref::RefStats::Outcome::kApplied) return;
    EXPECT_TRUE(Near(stats.penalty_mean, expected.penalty_mean, 1e-4, 1e-6))
        << at << " (penalty_mean)";
    EXPECT_EQ(stats.has_gap, expected.has_gap) << at;
    if (expected.has_gap) {
      ++gap_checks_;
      if (stats.gap.gap_max > 1.0) ++gap_nontrivial_;
      EXPECT_TRUE(GapStatsNear(stats.gap, expected.gap, p_)) << at << " (model)";
      EXPECT_TRUE(Near(stats.penalty_mean, stats.gap.penalty_mean, 1e-9, 1e-12)) << at;
      ASSERT_EQ(stats.per_tensor.size(), layout_.num_tensors()) << at;
      for (size_t t = 0; t < layout_.num_tensors(); ++t) {
        EXPECT_TRUE(GapStatsNear(stats.per_tensor[t], expected.per_tensor[t],
                                 layout_.tensors()[t].size))
            << at << " (tensor " << layout_.tensors()[t].name << ")";
      }
    }
  }

  // A member leaves (possibly completing a sync step) and a new one joins.
  void Churn() {
    std::vector<uint32_t> candidates;
    for (const auto& [id, worker] : workers_) {
      // Sync: only a worker that has not pushed in the pending step (what
      // happens to a leaver's buffered gradient is not specified).
      if (is_sync()) {
        const auto* sync = static_cast<const ref::SyncRef*>(reference_.get());
        if (sync->pushed.count(id)) continue;
      }
      candidates.push_back(id);
    }
    if (candidates.empty()) return;
    const uint32_t leaver = candidates[rng_() % candidates.size()];
    const size_t memory_before = engine_->store().MemoryBytes();

    ApplyStats stats;
    Status s = engine_->Leave(leaver, &stats);
    ASSERT_TRUE(s.ok()) << s.ToString();
    workers_.erase(leaver);
    ref::RefStats expected;
    const bool stepped =
        reference_->Leave(leaver, workers_.size(), schedule_.At(version_), &expected);
    if (stepped) {
      ++version_;
      ++leave_steps_;
      EXPECT_EQ(stats.outcome, Outcome::kApplied);
      EXPECT_EQ(stats.aggregated, expected.aggregated);
      EXPECT_TRUE(Near(stats.learning_rate, expected.learning_rate, 1e-9, 0.0));
    }
    ASSERT_EQ(engine_->version(), version_) << "after leave of " << leaver;
    ASSERT_TRUE(VecNear(engine_->store().params(), reference_->theta, kRtol, atol_))
        << "after leave of " << leaver;
    EXPECT_EQ(engine_->store().MemoryBytes(), ExpectedMemory()) << "after leave";
    if (ExpectedMemory() < memory_before) ++memory_drops_;
    ++leaves_;
    Join(next_id_++);
  }

  void Run() {
    for (int w = 0; w < case_.initial_workers; ++w) {
      Join(next_id_++);
      if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_EQ(engine_->num_workers(), static_cast<size_t>(case_.initial_workers));
    EXPECT_EQ(engine_->store().MemoryBytes(), ExpectedMemory()) << "after joins";
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    for (int e = 0; e < case_.events; ++e) {
      if ((uniform(rng_) < 0.03 && e > 10) || e == case_.events / 2) {
        Churn();
      } else {
        auto it = workers_.begin();
        std::advance(it, rng_() % workers_.size());
        const uint32_t w = it->first;
        const Worker& worker = it->second;
        const bool behind = worker.pulled && worker.base < version_;
        double pull_probability = 0.3;
        if (is_sync()) {
          // Mostly catch up, or wait, rather than push late or twice; some
          // late and duplicate pushes still happen.
          const auto* sync = static_cast<const ref::SyncRef*>(reference_.get());
          if (behind) pull_probability = 0.6;
          if (!behind && sync->pushed.count(w)) pull_probability = 0.8;
        }
        if (!worker.pulled || uniform(rng_) < pull_probability) {
          Pull(w);
        } else {
          Push(w);
        }
      }
      if (::testing::Test::HasFatalFailure()) return;
      ASSERT_EQ(engine_->store().MemoryBytes(), ExpectedMemory()) << "after event " << e;
    }
  }

  // Counters, to make sure a case really exercised what it should.
  int pushes_ = 0, pulls_ = 0, applied_ = 0, accumulated_ = 0, discarded_ = 0,
      rejected_ = 0, leaves_ = 0, leave_steps_ = 0, memory_drops_ = 0;
  int gap_checks_ = 0, gap_nontrivial_ = 0;
  uint64_t version_ = 0;
  std::map<uint64_t, int> staleness_histogram_;


 private:
  struct Worker {
    bool pulled = false;
    uint64_t base = 0;
    Vec point;  // what the engine sent
    Vec copy;   // θ⁽ⁱ⁾ as the master reads it
    bool copy_is_bf16 = false;
    Vec echo_f32;
    std::vector<bf16_t> echo_bf16;
    ref::DanaSlimWorkerRef slim;
  };

  RuleCase case_;
  ParameterLayout layout_;
  size_t p_;
  std::mt19937 rng_;
  ref::RefSchedule schedule_;
  double atol_;
  Vec theta0_;
  std::unique_ptr<UpdateEngine> engine_;
  std::unique_ptr<ref::RefRule> reference_;
  std::map<uint32_t, Worker> workers_;
  uint32_t next_id_ = 10;
};

class RandomEventsTest : public ::testing::TestWithParam<RuleCase> {};

TEST_P(RandomEventsTest, MatchesReference) {
  const RuleCase& c = GetParam();
  ASSERT_TRUE(c.rule.Validate().ok()) << c.rule.Validate().ToString();
  Harness h(c);
  ASSERT_TRUE(h.ok());
  h.Run();
  if (HasFatalFailure()) return;
  // The run must have exercised the rule.
  EXPECT_GT(h.applied_, c.rule.kind == RuleKind::kSync ? 8 : 40) << "too few applied updates";
  EXPECT_GT(h.pulls_, 20);
  EXPECT_GT(h.leaves_, 0) << "no churn happened";
  if (IsGapRule(c.rule.kind)) {
    EXPECT_EQ(h.gap_checks_, h.applied_);
    EXPECT_GT(h.gap_nontrivial_, h.applied_ / 2) << "the Gap was rarely above 1";
  }
  if (c.rule.kind == RuleKind::kSync) {
    EXPECT_GT(h.accumulated_, 0);
    EXPECT_GT(h.discarded_, 0);
    EXPECT_GT(h.rejected_, 0) << "no duplicate push was tried";
    EXPECT_GT(h.leave_steps_, 0) << "no leave completed a step";
  }
  ASSERT_FALSE(h.staleness_histogram_.empty());
  const uint64_t max_tau = h.staleness_histogram_.rbegin()->first;
  if (c.rule.kind != RuleKind::kSync && c.rule.max_staleness == 0) {
    EXPECT_GE(max_tau, 4u) << "no real staleness";
    EXPECT_GE(h.staleness_histogram_.size(), 4u) << "too few distinct staleness values";
  }
  if (c.rule.max_staleness > 0) {
    EXPECT_EQ(max_tau, c.rule.max_staleness) << "the limit itself is accepted";
    EXPECT_GT(h.rejected_, 0) << "no push was too stale";
  }
}

std::vector<RuleCase> AllCases() {
  std::vector<RuleCase> cases;
  uint32_t seed = 100;
  auto add = [&](std::string name, RuleConfig rule, ScheduleConfig schedule = ScheduleConfig(),
                 DType echo_dtype = DType::kFloat32) {
    RuleCase c;
    c.name = std::move(name);
    c.rule = rule;
    c.schedule = schedule;
    c.echo_dtype = echo_dtype;
    c.seed = seed++;
    c.initial_workers = 4 + static_cast<int>(seed % 3);  // 4..6
    cases.push_back(c);
  };
  auto base = [](RuleKind kind, float momentum, bool nesterov, float wd, int threads = 1) {
    RuleConfig r;
    r.kind = kind;
    r.momentum = momentum;
    r.nesterov = nesterov;
    r.weight_decay = wd;
    r.num_threads = threads;
    return r;
  };
  ScheduleConfig constant;
  constant.learning_rate = 0.05;
  ScheduleConfig warm_decay;  // warm-up then two decays inside the run
  warm_decay.learning_rate = 0.05;
  warm_decay.warmup_updates = 20;
  warm_decay.warmup_start_factor = 0.2;
  warm_decay.decay_at_fractions = {0.4, 0.7};
  warm_decay.decay_factor = 0.1;
  warm_decay.total_updates = 150;

  // ASGD
  add("asgd_plain", base(RuleKind::kAsgd, 0.0f, false, 0.0f), constant);
  add("asgd_momentum", base(RuleKind::kAsgd, 0.9f, false, 0.0f), constant);
  add("asgd_nesterov_wd", base(RuleKind::kAsgd, 0.9f, true, 1e-3f), constant);
  add("asgd_momentum_wd_threads3", base(RuleKind::kAsgd, 0.9f, false, 1e-3f, 3), warm_decay);
  {
    RuleConfig r = base(RuleKind::kAsgd, 0.9f, false, 1e-3f);
    r.max_staleness = 3;
    add("asgd_max_staleness3", r, constant);
  }
  // SA
  add("sa_plain_wd", base(RuleKind::kStalenessAware, 0.0f, false, 1e-3f), constant);
  add("sa_momentum", base(RuleKind::kStalenessAware, 0.9f, false, 0.0f), constant);
  add("sa_nesterov_wd_threads3", base(RuleKind::kStalenessAware, 0.9f, true, 1e-3f, 3),
      warm_decay);
  // GA
  {
    RuleConfig r = base(RuleKind::kGapAware, 0.9f, false, 1e-3f);
    add("ga_snapshot_fp32_pwd", r, constant);
    r.penalize_weight_decay = false;
    add("ga_snapshot_fp32_nopwd", r, constant);
    r.gap_precision = GapPrecision::kBfloat16;
    add("ga_snapshot_bf16_nopwd", r, constant);
    r.penalize_weight_decay = true;
    r.num_threads = 3;
    add("ga_snapshot_bf16_pwd_threads3", r, warm_decay);
  }
  {
    RuleConfig r = base(RuleKind::kGapAware, 0.0f, false, 1e-3f);
    add("ga_snapshot_mom0_pwd", r, constant);
    r.penalize_weight_decay = false;
    r.gap_source = GapSource::kEcho;
    add("ga_echo_fp32_mom0_nopwd", r, constant);
  }
  {
    RuleConfig r = base(RuleKind::kGapAware, 0.9f, true, 1e-3f);
    r.gap_source = GapSource::kEcho;
    r.gap_precision = GapPrecision::kBfloat16;
    add("ga_echo_bf16_nesterov", r, constant, DType::kBfloat16);
    r.num_threads = 3;
    add("ga_echo_fp32copy_nesterov_threads3", r, warm_decay, DType::kFloat32);
  }
  {
    RuleConfig r = base(RuleKind::kGapAware, 0.9f, false, 0.0f);
    r.gap_beta = 0.9;
    add("ga_snapshot_beta0.9_warm_decay", r, warm_decay);
  }
  // DANA-Zero
  add("dana_zero_momentum", base(RuleKind::kDanaZero, 0.9f, false, 0.0f), constant);
  add("dana_zero_wd_threads3", base(RuleKind::kDanaZero, 0.9f, false, 1e-3f, 3), warm_decay);
  add("dana_zero_mom0", base(RuleKind::kDanaZero, 0.0f, false, 1e-3f), constant);
  // DANA-Slim (λ is applied by the worker; the master must ignore it)
  add("dana_slim_wd", base(RuleKind::kDanaSlim, 0.9f, false, 1e-3f), constant);
  add("dana_slim_mom0", base(RuleKind::kDanaSlim, 0.0f, false, 0.0f), constant);
  add("dana_slim_threads3", base(RuleKind::kDanaSlim, 0.9f, false, 0.0f, 3), warm_decay);
  // GA + DANA
  {
    RuleConfig r = base(RuleKind::kGapAwareDana, 0.9f, false, 1e-3f);
    add("ga_dana_snapshot_fp32_pwd", r, constant);
    r.penalize_weight_decay = false;
    r.gap_precision = GapPrecision::kBfloat16;
    add("ga_dana_snapshot_bf16_nopwd", r, constant);
    r.gap_source = GapSource::kEcho;
    add("ga_dana_echo_bf16_nopwd", r, constant, DType::kBfloat16);
    r.penalize_weight_decay = true;
    r.num_threads = 3;
    add("ga_dana_echo_fp32_pwd_threads3", r, warm_decay, DType::kFloat32);
  }
  // DC-ASGD
  {
    RuleConfig r = base(RuleKind::kDcAsgd, 0.0f, false, 0.0f);
    add("dc_constant_snapshot_fp32", r, constant);
    r = base(RuleKind::kDcAsgd, 0.9f, false, 1e-3f);
    r.dc_adaptive = true;
    r.gap_precision = GapPrecision::kBfloat16;
    add("dc_adaptive_snapshot_bf16_wd", r, constant);
    r = base(RuleKind::kDcAsgd, 0.9f, true, 0.0f);
    r.gap_source = GapSource::kEcho;
    add("dc_constant_echo_fp32_nesterov", r, constant);
    r = base(RuleKind::kDcAsgd, 0.9f, false, 1e-3f, 3);
    r.dc_adaptive = true;
    r.gap_source = GapSource::kEcho;
    add("dc_adaptive_echo_bf16_threads3", r, warm_decay, DType::kBfloat16);
  }
  // Sync
  {
    RuleConfig r = base(RuleKind::kSync, 0.0f, false, 0.0f);
    add("sync_b0", r, constant);
    cases.back().events = 400;
    r = base(RuleKind::kSync, 0.9f, true, 1e-3f);
    r.backup_workers = 1;
    add("sync_b1_nesterov_wd", r, constant);
    cases.back().events = 400;
    r = base(RuleKind::kSync, 0.9f, false, 1e-3f, 3);
    r.backup_workers = 2;
    add("sync_b2_momentum_threads3", r, warm_decay);
    cases.back().events = 400;
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllRules, RandomEventsTest, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<RuleCase>& info) {
                           std::string n = info.param.name;
                           for (char& ch : n) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

// ------------------------------------------------------- small cases

struct Simple {
  ParameterLayout layout = TestLayout();
  size_t p = layout.size();
  std::mt19937 rng{7};
};

PushRequest Request(uint32_t worker, uint64_t base, const Vec& g) {
  PushRequest r;
  r.worker = worker;
  r.base_version = base;
  r.gradient = GradientView(g.data(), g.size());
  return r;
}

Vec Params(const UpdateEngine& e) {
  return Vec(e.store().params(), e.store().params() + e.store().size());
}

Vec PullVec(UpdateEngine* e, uint32_t w, uint64_t* version) {
  Vec out(e->store().size());
  Status s = e->Pull(w, out.data(), out.size(), version);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

// GA with no Gap (every push on the current version, so τ = 0 and Δ = 0)
// is exactly ASGD.
TEST(GapAwareSmallTest, ZeroGapEqualsAsgd) {
  Simple t;
  const Vec theta0 = RandomVec(&t.rng, t.p, 0.5f);
  ScheduleConfig schedule;
  schedule.learning_rate = 0.05;
  for (bool nesterov : {false, true}) {
    for (bool pwd : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "nesterov " << nesterov << " pwd " << pwd);
      RuleConfig ga;
      ga.kind = RuleKind::kGapAware;
      ga.momentum = 0.9f;
      ga.nesterov = nesterov;
      ga.weight_decay = 1e-3f;
      ga.penalize_weight_decay = pwd;
      RuleConfig asgd = ga;
      asgd.kind = RuleKind::kAsgd;
      auto e_ga = MakeEngine(t.layout, ga, schedule, theta0);
      auto e_asgd = MakeEngine(t.layout, asgd, schedule, theta0);
      ASSERT_TRUE(e_ga && e_asgd);
      for (uint32_t w = 0; w < 3; ++w) {
        ASSERT_TRUE(e_ga->Join(w).ok());
        ASSERT_TRUE(e_asgd->Join(w).ok());
      }
      for (int step = 0; step < 30; ++step) {
        const uint32_t w = step % 3;
        uint64_t v1 = 0, v2 = 0;
        PullVec(e_ga.get(), w, &v1);
        PullVec(e_asgd.get(), w, &v2);
        ASSERT_EQ(v1, v2);
        const Vec g = RandomVec(&t.rng, t.p, 1.0f);
        ApplyStats s1, s2;
        ASSERT_TRUE(e_ga->Push(Request(w, v1, g), &s1).ok());
        ASSERT_TRUE(e_asgd->Push(Request(w, v2, g), &s2).ok());
        EXPECT_EQ(s1.staleness, 0u);
        EXPECT_TRUE(s1.has_gap);
        EXPECT_EQ(s1.gap.gap_mean, 1.0);
        EXPECT_EQ(s1.gap.gap_max, 1.0);
        EXPECT_EQ(s1.gap.penalised_fraction, 0.0);
        EXPECT_EQ(s1.penalty_mean, 1.0);
        ASSERT_EQ(s1.per_tensor.size(), 3u);
        for (const GapStats& ts : s1.per_tensor) EXPECT_EQ(ts.gap_max, 1.0);
        const Vec a = Params(*e_ga), b = Params(*e_asgd);
        ASSERT_TRUE(VecNear(a.data(), b, 1e-6, 0.0)) << "step " << step;
      }
    }
  }
}

// A bf16 copy is θ⁽ⁱ⁾ rounded: the rounding is not a move. A copy of θ
// that did not move has distance 0; a move counts less the half ulp.
TEST(GapAwareSmallTest, CopyDistanceDiscountsTheBf16Rounding) {
  for (float theta : {0.3f, -1.7f, 123.456f, 1e-3f, -2.0f}) {
    const bf16_t copy = FloatToBf16(theta);
    EXPECT_EQ(CopyDistance(theta, &copy, 0), 0.0f) << theta;
    const float value = Bf16ToFloat(copy);
    int exponent = 0;
    std::frexp(value, &exponent);
    const float half_ulp = std::ldexp(1.0f, exponent - 1 - 8);
    // θ moved three half ulps away from the copy's value: two count.
    EXPECT_FLOAT_EQ(CopyDistance(value + 3 * half_ulp, &copy, 0), 2 * half_ulp) << theta;
    EXPECT_FLOAT_EQ(CopyDistance(value, &copy, 0), 0.0f);
    EXPECT_FLOAT_EQ(static_cast<float>(ref::RefCopyDistance(value + 3 * half_ulp, value, true)),
                    2 * half_ulp);
  }
  const float f32_copy = 0.25f;
  EXPECT_EQ(CopyDistance(0.5f, &f32_copy, 0), 0.25f) << "an fp32 copy is exact";
}

// With bf16 echoes a push on a θ that has not moved since the pull has
// Gap 1, as with fp32 ones, however large θ is beside C (the rounding
// used to count as a move of ~|θ|/512 and divide gradients by ~27).
TEST(GapAwareSmallTest, Bf16CopiesOfAnUnmovedThetaHaveGapOne) {
  Simple t;
  const Vec theta0 = RandomVec(&t.rng, t.p, 2.0f);
  ScheduleConfig schedule;
  schedule.learning_rate = 1e-4;  // C tiny beside the rounding of θ
  for (GapSource source : {GapSource::kEcho, GapSource::kSnapshot}) {
    SCOPED_TRACE(source == GapSource::kEcho ? "echo" : "snapshot");
    RuleConfig ga;
    ga.kind = RuleKind::kGapAware;
    ga.momentum = 0.9f;
    ga.gap_source = source;
    ga.gap_precision = GapPrecision::kBfloat16;
    auto e = MakeEngine(t.layout, ga, schedule, theta0);
    ASSERT_TRUE(e);
    ASSERT_TRUE(e->Join(0).ok());
    for (int step = 0; step < 5; ++step) {
      uint64_t v = 0;
      const Vec point = PullVec(e.get(), 0, &v);
      std::vector<bf16_t> echo(t.p);
      FloatsToBf16(point.data(), t.p, echo.data());
      const Vec g = RandomVec(&t.rng, t.p, 1.0f);
      PushRequest req = Request(0, v, g);
      if (source == GapSource::kEcho) {
        req.echo.dtype = DType::kBfloat16;
        req.echo.data = echo.data();
        req.echo_size = t.p;
      }
      ApplyStats s;
      ASSERT_TRUE(e->Push(req, &s).ok());
      EXPECT_EQ(s.gap.gap_mean, 1.0) << "step " << step;
      EXPECT_EQ(s.gap.gap_max, 1.0) << "step " << step;
    }
  }
}

// SA with τ = 4 takes the ASGD step of g/4 (weight decay unscaled).
TEST(StalenessAwareSmallTest, StalenessFourQuartersTheGradient) {
  Simple t;
  const Vec theta0 = RandomVec(&t.rng, t.p, 0.5f);
  ScheduleConfig schedule;
  schedule.learning_rate = 0.05;
  RuleConfig sa;
  sa.kind = RuleKind::kStalenessAware;
  sa.momentum = 0.9f;
  sa.weight_decay = 1e-3f;
  RuleConfig asgd = sa;
  asgd.kind = RuleKind::kAsgd;
  // SA, ASGD fed g/4 at the end, ASGD fed g at the end; in lockstep.
  auto e_sa = MakeEngine(t.layout, sa, schedule, theta0);
  auto e_quarter = MakeEngine(t.layout, asgd, schedule, theta0);
  auto e_full = MakeEngine(t.layout, asgd, schedule, theta0);
  ASSERT_TRUE(e_sa && e_quarter && e_full);
  std::vector<UpdateEngine*> all = {e_sa.get(), e_quarter.get(), e_full.get()};
  for (UpdateEngine* e : all) {
    ASSERT_TRUE(e->Join(0).ok());
    ASSERT_TRUE(e->Join(1).ok());
  }
  uint64_t stale_base = 99;
  for (UpdateEngine* e : all) PullVec(e, 0, &stale_base);
  ASSERT_EQ(stale_base, 0u);
  // Worker 1 pushes four fresh gradients (τ = 0, so SA = ASGD).
  for (int i = 0; i < 4; ++i) {
    const Vec g = RandomVec(&t.rng, t.p, 1.0f);
    for (UpdateEngine* e : all) {
      uint64_t v = 0;
      PullVec(e, 1, &v);
      ApplyStats s;
      ASSERT_TRUE(e->Push(Request(1, v, g), &s).ok());
      EXPECT_EQ(s.staleness, 0u);
      EXPECT_EQ(s.penalty_mean, 1.0);
    }
  }
  ASSERT_EQ(e_sa->version(), 4u);
  const Vec before = Params(*e_sa);
  ASSERT_TRUE(VecNear(e_quarter->store().params(), before, 1e-6, 0.0));

  // Worker 0 pushes g on version 0: τ = 4.
  const Vec g = RandomVec(&t.rng, t.p, 1.0f);
  Vec quarter(g);
  for (float& x : quarter) x /= 4.0f;
  ApplyStats s_sa, s_quarter, s_full;
  ASSERT_TRUE(e_sa->Push(Request(0, stale_base, g), &s_sa).ok());
  ASSERT_TRUE(e_quarter->Push(Request(0, stale_base, quarter), &s_quarter).ok());
  ASSERT_TRUE(e_full->Push(Request(0, stale_base, g), &s_full).ok());
  EXPECT_EQ(s_sa.staleness, 4u);
  EXPECT_DOUBLE_EQ(s_sa.penalty_mean, 0.25);
  EXPECT_FALSE(s_sa.has_gap);
  EXPECT_EQ(s_full.penalty_mean, 1.0);  // ASGD does not scale
  Vec change_sa(t.p), change_quarter(t.p), change_full(t.p);
  for (size_t j = 0; j < t.p; ++j) {
    change_sa[j] = e_sa->store().params()[j] - before[j];
    change_quarter[j] = e_quarter->store().params()[j] - before[j];
    change_full[j] = e_full->store().params()[j] - before[j];
  }
  EXPECT_TRUE(VecNear(change_sa.data(), change_quarter, 1e-5, 1e-8));
  EXPECT_FALSE(VecNear(change_sa.data(), change_full, 1e-3, 1e-8));
}

// DANA-Slim's x equals DANA-Zero's look-ahead θ − ηγS when η is constant,
// λ = 0, and both see gradients evaluated at the points their workers got.
TEST(DanaSmallTest, SlimEqualsZeroForConstantLearningRate) {
  Simple t;
  const Vec theta0 = RandomVec(&t.rng, t.p, 0.5f);
  std::uniform_real_distribution<float> uniform(0.5f, 1.5f);
  Vec a(t.p), target = RandomVec(&t.rng, t.p, 1.0f);
  for (float& x : a) x = uniform(t.rng);
  const int kWorkers = 4;
  std::vector<Vec> offset;
  for (int i = 0; i < kWorkers; ++i) offset.push_back(RandomVec(&t.rng, t.p, 0.3f));
  auto grad = [&](int worker, const Vec& x) {
    Vec g(t.p);
    for (size_t j = 0; j < t.p; ++j) g[j] = a[j] * (x[j] - target[j]) + offset[worker][j];
    return g;
  };

  ScheduleConfig schedule;
  schedule.learning_rate = 0.01;
  RuleConfig zero;
  zero.kind = RuleKind::kDanaZero;
  zero.momentum = 0.9f;
  RuleConfig slim = zero;
  slim.kind = RuleKind::kDanaSlim;
  auto e_zero = MakeEngine(t.layout, zero, schedule, theta0);
  auto e_slim = MakeEngine(t.layout, slim, schedule, theta0);
  ASSERT_TRUE(e_zero && e_slim);
  const uint32_t kObserver = 99;
  for (uint32_t w = 0; w < kWorkers; ++w) {
    ASSERT_TRUE(e_zero->Join(w).ok());
    ASSERT_TRUE(e_slim->Join(w).ok());
  }
  ASSERT_TRUE(e_zero->Join(kObserver).ok());
  ASSERT_TRUE(e_slim->Join(kObserver).ok());

  std::vector<Vec> zero_point(kWorkers), slim_point(kWorkers), velocity(kWorkers, Vec(t.p, 0.0f));
  std::vector<uint64_t> zero_base(kWorkers), slim_base(kWorkers);
  std::vector<bool> pulled(kWorkers, false);
  int pushes = 0;
  double max_lookahead = 0.0;
  for (int e = 0; e < 300; ++e) {
    const int w = static_cast<int>(t.rng() % kWorkers);
    if (!pulled[w] || t.rng() % 3 == 0) {
      zero_point[w] = PullVec(e_zero.get(), w, &zero_base[w]);
      slim_point[w] = PullVec(e_slim.get(), w, &slim_base[w]);
      ASSERT_EQ(zero_base[w], slim_base[w]);
      pulled[w] = true;
      continue;
    }
    const Vec g_zero = grad(w, zero_point[w]);
    Vec u = grad(w, slim_point[w]);
    DanaSlimWorkerStep(slim.momentum, u.data(), velocity[w].data(), u.data(), t.p);
    ApplyStats s1, s2;
    ASSERT_TRUE(e_zero->Push(Request(w, zero_base[w], g_zero), &s1).ok());
    ASSERT_TRUE(e_slim->Push(Request(w, slim_base[w], u), &s2).ok());
    EXPECT_EQ(s1.staleness, s2.staleness);
    ++pushes;
    uint64_t v1 = 0, v2 = 0;
    const Vec look_ahead = PullVec(e_zero.get(), kObserver, &v1);
    const Vec x = PullVec(e_slim.get(), kObserver, &v2);
    ASSERT_EQ(v1, v2);
    ASSERT_TRUE(VecNear(x.data(), look_ahead, 1e-4, 1e-5)) << "after push " << pushes;
    // The slim master's x is its parameter vector.
    ASSERT_TRUE(VecNear(e_slim->store().params(), x, 0.0, 0.0));
    const Vec theta = Params(*e_zero);
    for (size_t j = 0; j < t.p; ++j) {
      max_lookahead =
          std::max(max_lookahead, std::fabs(static_cast<double>(theta[j] - look_ahead[j])));
    }
  }
  EXPECT_GT(pushes, 100);
  // The look-ahead really differed from θ: the test can tell the two apart.
  EXPECT_GT(max_lookahead, 1e-2);
}

// Sync, 3 live workers, b = 1: the step applies after 2 pushes with their
// mean; the third gradient arrives late and is discarded and counted.
TEST(SyncSmallTest, BackupWorkerGradientIsDiscarded) {
  Simple t;
  const Vec theta0 = RandomVec(&t.rng, t.p, 0.5f);
  ScheduleConfig schedule;
  schedule.learning_rate = 0.1;
  RuleConfig rule;
  rule.kind = RuleKind::kSync;
  rule.backup_workers = 1;
  auto e = MakeEngine(t.layout, rule, schedule, theta0);
  ASSERT_TRUE(e);
  for (uint32_t w = 0; w < 3; ++w) ASSERT_TRUE(e->Join(w).ok());
  uint64_t base[3];
  for (uint32_t w = 0; w < 3; ++w) PullVec(e.get(), w, &base[w]);
  const Vec g0 = RandomVec(&t.rng, t.p, 1.0f), g1 = RandomVec(&t.rng, t.p, 1.0f),
            g2 = RandomVec(&t.rng, t.p, 1.0f);

  ApplyStats s;
  ASSERT_TRUE(e->Push(Request(0, base[0], g0), &s).ok());
  EXPECT_EQ(s.outcome, Outcome::kAccumulated);
  EXPECT_EQ(e->version(), 0u);
  EXPECT_EQ(std::memcmp(e->store().params(), theta0.data(), t.p * sizeof(float)), 0);

  ASSERT_TRUE(e->Push(Request(1, base[1], g1), &s).ok());
  EXPECT_EQ(s.outcome, Outcome::kApplied);
  EXPECT_EQ(s.aggregated, 2u);
  EXPECT_DOUBLE_EQ(s.learning_rate, 0.1);
  EXPECT_EQ(e->version(), 1u);
  Vec expected(t.p);
  for (size_t j = 0; j < t.p; ++j) expected[j] = theta0[j] - 0.1f * ((g0[j] + g1[j]) / 2.0f);
  EXPECT_TRUE(VecNear(e->store().params(), expected, 1e-6, 1e-7));

  const Vec after_step = Params(*e);
  ASSERT_TRUE(e->Push(Request(2, base[2], g2), &s).ok());
  EXPECT_EQ(s.outcome, Outcome::kDiscardedLate);
  EXPECT_EQ(s.staleness, 1u);
  EXPECT_EQ(e->discarded_late(), 1u);
  EXPECT_EQ(e->version(), 1u);
  EXPECT_EQ(std::memcmp(e->store().params(), after_step.data(), t.p * sizeof(float)), 0);

  // A second gradient of one worker for one step is rejected as a duplicate.
  uint64_t v = 0;
  PullVec(e.get(), 0, &v);
  ASSERT_EQ(v, 1u);
  ASSERT_TRUE(e->Push(Request(0, v, g0), &s).ok());
  EXPECT_EQ(s.outcome, Outcome::kAccumulated);
  Status dup = e->Push(Request(0, v, g1), &s);
  EXPECT_FALSE(dup.ok());
  EXPECT_EQ(e->rejected(RejectReason::kDuplicate), 1u);
  EXPECT_EQ(e->version(), 1u);
  EXPECT_EQ(std::memcmp(e->store().params(), after_step.data(), t.p * sizeof(float)), 0);
  // The step then completes with the other worker's gradient only.
  PullVec(e.get(), 1, &v);
  ASSERT_TRUE(e->Push(Request(1, v, g2), &s).ok());
  EXPECT_EQ(s.outcome, Outcome::kApplied);
  EXPECT_EQ(s.aggregated, 2u);
  for (size_t j = 0; j < t.p; ++j) expected[j] = after_step[j] - 0.1f * ((g0[j] + g2[j]) / 2.0f);
  EXPECT_TRUE(VecNear(e->store().params(), expected, 1e-6, 1e-7));
}

// Sync, 3 workers, b = 0: two pushed; the third leaves, and the step
// completes from Leave.
TEST(SyncSmallTest, LeaveCompletesThePendingStep) {
  Simple t;
  const Vec theta0 = RandomVec(&t.rng, t.p, 0.5f);
  ScheduleConfig schedule;
  schedule.learning_rate = 0.1;
  RuleConfig rule;
  rule.kind = RuleKind::kSync;
  rule.momentum = 0.9f;
  rule.weight_decay = 1e-3f;
  auto e = MakeEngine(t.layout, rule, schedule, theta0);
  ASSERT_TRUE(e);
  for (uint32_t w = 0; w < 3; ++w) ASSERT_TRUE(e->Join(w).ok());
  uint64_t base[3];
  for (uint32_t w = 0; w < 3; ++w) PullVec(e.get(), w, &base[w]);
  const Vec g0 = RandomVec(&t.rng, t.p, 1.0f), g1 = RandomVec(&t.rng, t.p, 1.0f);
  ApplyStats s;
  ASSERT_TRUE(e->Push(Request(0, base[0], g0), &s).ok());
  EXPECT_EQ(s.outcome, Outcome::kAccumulated);
  ASSERT_TRUE(e->Push(Request(1, base[1], g1), &s).ok());
  EXPECT_EQ(s.outcome, Outcome::kAccumulated);
  EXPECT_EQ(e->version(), 0u);
  const size_t memory = e->store().MemoryBytes();

  ApplyStats leave_stats;
  ASSERT_TRUE(e->Leave(2, &leave_stats).ok());
  EXPECT_EQ(leave_stats.outcome, Outcome::kApplied);
  EXPECT_EQ(leave_stats.aggregated, 2u);
  EXPECT_DOUBLE_EQ(leave_stats.learning_rate, 0.1);
  EXPECT_EQ(e->version(), 1u);
  Vec expected(t.p);
  for (size_t j = 0; j < t.p; ++j) {
    const float d = (g0[j] + g1[j]) / 2.0f + 1e-3f * theta0[j];
    const float v = d;  // momentum buffer starts at 0
    expected[j] = theta0[j] - 0.1f * v;
  }
  EXPECT_TRUE(VecNear(e->store().params(), expected, 1e-6, 1e-7));
  EXPECT_EQ(e->store().MemoryBytes(), memory);  // sync keeps no per-worker state
}

TEST(SyncSmallTest, LeaveWithoutEnoughGradientsWaits) {
  Simple t;
  const Vec theta0 = RandomVec(&t.rng, t.p, 0.5f);
  RuleConfig rule;
  rule.kind = RuleKind::kSync;
  auto e = MakeEngine(t.layout, rule, ScheduleConfig(), theta0);
  ASSERT_TRUE(e);
  for (uint32_t w = 0; w < 4; ++w) ASSERT_TRUE(e->Join(w).ok());
  uint64_t v = 0;
  for (uint32_t w = 0; w < 4; ++w) PullVec(e.get(), w, &v);
  const Vec g = RandomVec(&t.rng, t.p, 1.0f);
  ApplyStats s;
  ASSERT_TRUE(e->Push(Request(0, 0, g), &s).ok());
  ASSERT_TRUE(e->Push(Request(1, 0, g), &s).ok());
  ASSERT_TRUE(e->Leave(3, &s).ok());  // 3 live, 2 of 3 gradients
  EXPECT_EQ(e->version(), 0u);
  EXPECT_EQ(std::memcmp(e->store().params(), theta0.data(), t.p * sizeof(float)), 0);
  ASSERT_TRUE(e->Push(Request(2, 0, g), &s).ok());
  EXPECT_EQ(s.outcome, Outcome::kApplied);
  EXPECT_EQ(s.aggregated, 3u);
  EXPECT_EQ(e->version(), 1u);
}

// GA skips the penalty on its first update even when the copy is far off.
TEST(GapAwareSmallTest, FirstUpdateIsNotPenalised) {
  Simple t;
  const Vec theta0 = RandomVec(&t.rng, t.p, 0.5f);
  ScheduleConfig schedule;
  schedule.learning_rate = 0.05;
  RuleConfig ga;
  ga.kind = RuleKind::kGapAware;
  ga.momentum = 0.9f;
  ga.weight_decay = 1e-3f;
  ga.gap_source = GapSource::kEcho;
  RuleConfig asgd = ga;
  asgd.kind = RuleKind::kAsgd;
  auto e_ga = MakeEngine(t.layout, ga, schedule, theta0);
  auto e_asgd = MakeEngine(t.layout, asgd, schedule, theta0);
  ASSERT_TRUE(e_ga && e_asgd);
  ASSERT_TRUE(e_ga->Join(0).ok());
  ASSERT_TRUE(e_asgd->Join(0).ok());
  ref::GapAwareRef reference(theta0, ga.momentum, ga.nesterov, ga.weight_decay,
                             ga.penalize_weight_decay, ga.gap_beta, ga.gap_epsilon,
                             Ranges(t.layout));
  // A stale copy: far from θ.
  Vec stale(theta0);
  for (float& x : stale) x += 0.5f;

  for (int step = 0; step < 3; ++step) {
    const Vec g = RandomVec(&t.rng, t.p, 1.0f);
    PushRequest req = Request(0, e_ga->version(), g);
    req.echo.dtype = DType::kFloat32;
    req.echo.data = stale.data();
    req.echo_size = stale.size();
    ApplyStats s;
    ASSERT_TRUE(e_ga->Push(req, &s).ok());
    ref::RefPush rp;
    rp.worker = 0;
    rp.gradient = &g;
    rp.copy = &stale;
    rp.learning_rate = 0.05;
    const ref::RefStats expected = reference.Push(rp);
    ASSERT_TRUE(VecNear(e_ga->store().params(), reference.theta, kRtol, kGapAtol)) << step;
    EXPECT_TRUE(GapStatsNear(s.gap, expected.gap, t.p)) << step;
    reference.theta.assign(e_ga->store().params(), e_ga->store().params() + t.p);
    if (step == 0) {
      EXPECT_TRUE(s.has_gap);
      EXPECT_EQ(s.gap.gap_mean, 1.0);
      EXPECT_EQ(s.gap.gap_max, 1.0);
      EXPECT_EQ(s.penalty_mean, 1.0);
      ApplyStats sa;
      ASSERT_TRUE(e_asgd->Push(Request(0, 0, g), &sa).ok());
      EXPECT_TRUE(VecNear(e_ga->store().params(), Params(*e_asgd), 1e-6, 0.0));
    } else {
      // From the second update on the stale copy is penalised heavily.
      EXPECT_GT(s.gap.gap_mean, 2.0) << step;
      EXPECT_GT(s.gap.penalised_fraction, 0.5) << step;
    }
  }
}

// After the learning rate decays, C keeps using η_max, so the Gap relaxes.
TEST(GapAwareSmallTest, EtaMaxSurvivesDecay) {
  Simple t;
  const Vec theta0 = RandomVec(&t.rng, t.p, 0.5f);
  ScheduleConfig schedule;
  schedule.learning_rate = 0.1;
  schedule.decay_at_fractions = {0.5};
  schedule.decay_factor = 0.1;
  schedule.total_updates = 30;
  const ref::RefSchedule rs = ToRef(schedule);
  RuleConfig ga;
  ga.kind = RuleKind::kGapAware;
  ga.momentum = 0.9f;
  ga.weight_decay = 1e-3f;
  ga.gap_beta = 0.9;
  auto e = MakeEngine(t.layout, ga, schedule, theta0);
  ASSERT_TRUE(e);
  ref::GapAwareRef reference(theta0, ga.momentum, ga.nesterov, ga.weight_decay,
                             ga.penalize_weight_decay, ga.gap_beta, ga.gap_epsilon,
                             Ranges(t.layout));
  const int kWorkers = 4;
  std::vector<uint64_t> base(kWorkers);
  std::vector<Vec> copy(kWorkers);
  for (int w = 0; w < kWorkers; ++w) {
    ASSERT_TRUE(e->Join(w).ok());
    copy[w] = PullVec(e.get(), w, &base[w]);
  }
  int decayed_checks = 0;
  for (int step = 0; step < 30; ++step) {
    const int w = step % kWorkers;  // round robin: τ = 3 after the first round
    const Vec g = RandomVec(&t.rng, t.p, 1.0f);
    const uint64_t version = e->version();
    const double lr = rs.At(version);
    ASSERT_DOUBLE_EQ(e->learning_rate(), lr);
    // What C computed from the current (decayed) η would give: the engine
    // must not do this.
    ref::GapAwareRef control = reference;
    control.track_eta_max = false;
    ApplyStats s;
    ASSERT_TRUE(e->Push(Request(w, base[w], g), &s).ok());
    ref::RefPush rp;
    rp.worker = w;
    rp.gradient = &g;
    rp.copy = &copy[w];
    rp.staleness = version - base[w];
    rp.learning_rate = lr;
    const ref::RefStats expected = reference.Push(rp);
    const ref::RefStats wrong = control.Push(rp);
    EXPECT_DOUBLE_EQ(s.learning_rate, lr);
    ASSERT_TRUE(VecNear(e->store().params(), reference.theta, kRtol, kGapAtol)) << step;
    EXPECT_TRUE(GapStatsNear(s.gap, expected.gap, t.p)) << step;
    // Continue from the engine's θ (see Harness::ResyncTheta).
    reference.theta.assign(e->store().params(), e->store().params() + t.p);
    if (lr < 0.1 && step > 0) {
      ++decayed_checks;
      EXPECT_DOUBLE_EQ(reference.eta_max, 0.1);
      // η_max is 10x the current η: the control's Gap is far larger.
      EXPECT_GT(wrong.gap.gap_mean - 1.0, 3.0 * (expected.gap.gap_mean - 1.0)) << step;
      EXPECT_FALSE(GapStatsNear(s.gap, wrong.gap, t.p)) << step;
    }
    copy[w] = PullVec(e.get(), w, &base[w]);
  }
  EXPECT_GE(decayed_checks, 10);
}

// GA + DANA's first update is not penalised either, and Δ is measured
// against the look-ahead point the worker received.
TEST(GapAwareDanaSmallTest, DeltaIsAgainstTheLookAhead) {
  Simple t;
  const Vec theta0 = RandomVec(&t.rng, t.p, 0.5f);
  ScheduleConfig schedule;
  schedule.learning_rate = 0.05;
  RuleConfig rule;
  rule.kind = RuleKind::kGapAwareDana;
  rule.momentum = 0.9f;
  auto e = MakeEngine(t.layout, rule, schedule, theta0);
  ASSERT_TRUE(e);
  ref::GapAwareDanaRef reference(theta0, rule.momentum, rule.weight_decay,
                                 rule.penalize_weight_decay, rule.gap_beta, rule.gap_epsilon,
                                 Ranges(t.layout));
  // One worker that always pushes on the point it just pulled: Δ = θ − θ̂,
  // which is not zero once S ≠ 0 (the look-ahead).
  ASSERT_TRUE(e->Join(0).ok());
  reference.Join(0);
  bool saw_gap = false;
  for (int step = 0; step < 10; ++step) {
    uint64_t v = 0;
    const Vec point = PullVec(e.get(), 0, &v);
    ASSERT_TRUE(VecNear(point.data(), reference.Reply(0, 0.05), kRtol, kGapAtol));
    const Vec g = RandomVec(&t.rng, t.p, 1.0f);
    ApplyStats s;
    ASSERT_TRUE(e->Push(Request(0, v, g), &s).ok());
    ref::RefPush rp;
    rp.worker = 0;
    rp.gradient = &g;
    rp.copy = &point;
    rp.learning_rate = 0.05;
    const ref::RefStats expected = reference.Push(rp);
    EXPECT_EQ(s.staleness, 0u);
    ASSERT_TRUE(VecNear(e->store().params(), reference.theta, kRtol, kGapAtol)) << step;
    EXPECT_TRUE(GapStatsNear(s.gap, expected.gap, t.p)) << step;
    reference.theta.assign(e->store().params(), e->store().params() + t.p);
    if (step == 0) {
      EXPECT_EQ(s.gap.gap_max, 1.0);
    }
    if (s.gap.gap_max > 1.01) saw_gap = true;
  }
  EXPECT_TRUE(saw_gap) << "τ = 0 but the look-ahead should still give Δ ≠ 0";
}

// ------------------------------------------------- threads on a large model

// 800k parameters: enough that the engine really splits its hot loops over
// three threads (it gives a thread at least 2^18 elements), with the thread
// boundaries (266666, 533333) inside tensors.
ParameterLayout LargeLayout() {
  ParameterLayout layout;
  EXPECT_TRUE(layout.Add("big.weight", {400, 1000}).ok());  // [0, 400000)
  EXPECT_TRUE(layout.Add("big.bias", {7}).ok());            // [400000, 400007)
  EXPECT_TRUE(layout.Add("out.weight", {399993}).ok());     // [400007, 800000)
  return layout;
}

// Cheap deterministic values in [-scale, scale): the test code is built
// without optimisation, so std::normal_distribution over 800k is too slow.
Vec FastVec(uint64_t* state, size_t n, float scale) {
  Vec v(n);
  uint64_t x = *state;
  for (size_t j = 0; j < n; ++j) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v[j] = scale * (static_cast<float>(x >> 40) * (2.0f / 16777216.0f) - 1.0f);
  }
  *state = x;
  return v;
}

struct ThreadCase {
  std::string name;
  RuleConfig rule;
};

std::ostream& operator<<(std::ostream& os, const ThreadCase& c) { return os << c.name; }

class ThreadsTest : public ::testing::TestWithParam<ThreadCase> {};

// Splitting over threads changes nothing: θ, every state buffer and the
// Gap statistics are bit-identical to the one-thread run.
TEST_P(ThreadsTest, ThreeThreadsEqualOne) {
  const ParameterLayout layout = LargeLayout();
  const size_t p = layout.size();
  RuleConfig one = GetParam().rule;
  one.num_threads = 1;
  RuleConfig three = one;
  three.num_threads = 3;
  uint64_t state = 88172645463325252ull;
  const Vec theta0 = FastVec(&state, p, 1.0f);
  ScheduleConfig schedule;
  schedule.learning_rate = 0.05;
  auto e1 = MakeEngine(layout, one, schedule, theta0);
  auto e3 = MakeEngine(layout, three, schedule, theta0);
  ASSERT_TRUE(e1 && e3);
  const bool echo = one.NeedsWorkerCopy() && one.gap_source == GapSource::kEcho;
  const int kWorkers = 3;
  std::vector<uint64_t> base(kWorkers);
  std::vector<Vec> point(kWorkers);
  for (int w = 0; w < kWorkers; ++w) {
    ASSERT_TRUE(e1->Join(w).ok());
    ASSERT_TRUE(e3->Join(w).ok());
  }
  auto pull = [&](int w) {
    uint64_t v1 = 0, v3 = 0;
    point[w] = PullVec(e1.get(), w, &v1);
    const Vec other = PullVec(e3.get(), w, &v3);
    ASSERT_EQ(v1, v3);
    ASSERT_EQ(std::memcmp(point[w].data(), other.data(), p * sizeof(float)), 0);
    base[w] = v1;
  };
  for (int w = 0; w < kWorkers; ++w) pull(w);
  int applied = 0;
  for (int step = 0; step < 8; ++step) {
    const int w = step % kWorkers;
    const Vec g = FastVec(&state, p, 1.0f);
    PushRequest req = Request(w, base[w], g);
    if (echo) {
      req.echo.dtype = DType::kFloat32;
      req.echo.data = point[w].data();
      req.echo_size = p;
    }
    ApplyStats s1, s3;
    ASSERT_TRUE(e1->Push(req, &s1).ok());
    ASSERT_TRUE(e3->Push(req, &s3).ok());
    ASSERT_EQ(s1.outcome, s3.outcome);
    if (s1.outcome == Outcome::kApplied) ++applied;
    ASSERT_EQ(std::memcmp(e1->store().params(), e3->store().params(), p * sizeof(float)), 0)
        << "step " << step;
    EXPECT_EQ(s1.has_gap, s3.has_gap);
    EXPECT_EQ(s1.aggregated, s3.aggregated);
    // Units are summed in unit order whichever thread ran them, so the
    // statistics are exactly equal too.
    EXPECT_EQ(s1.penalty_mean, s3.penalty_mean);
    if (s1.has_gap) {
      EXPECT_TRUE(SameGapStats(s1.gap, s3.gap)) << step;
      ASSERT_EQ(s3.per_tensor.size(), 3u);
      for (size_t t = 0; t < 3; ++t) {
        EXPECT_TRUE(SameGapStats(s1.per_tensor[t], s3.per_tensor[t])) << step << " tensor " << t;
      }
    }
    if (step % 2 == 1 || one.kind == RuleKind::kSync) pull(w);
  }
  EXPECT_GE(applied, 2);
  // Every state buffer is bit-identical.
  const auto& b1 = e1->store().buffers();
  const auto& b3 = e3->store().buffers();
  ASSERT_EQ(b1.size(), b3.size());
  for (const auto& [name, buf] : b1) {
    auto it = b3.find(name);
    ASSERT_NE(it, b3.end()) << name;
    ASSERT_EQ(buf.bytes(), it->second.bytes()) << name;
    EXPECT_EQ(std::memcmp(buf.data(), it->second.data(), buf.bytes()), 0) << name;
  }
  EXPECT_EQ(e1->store().scalars(), e3->store().scalars());
}

std::vector<ThreadCase> ThreadCases() {
  auto rule = [](RuleKind kind, float momentum, bool nesterov, float wd) {
    RuleConfig r;
    r.kind = kind;
    r.momentum = momentum;
    r.nesterov = nesterov;
    r.weight_decay = wd;
    return r;
  };
  std::vector<ThreadCase> cases;
  cases.push_back({"asgd_nesterov", rule(RuleKind::kAsgd, 0.9f, true, 1e-3f)});
  cases.push_back({"sa", rule(RuleKind::kStalenessAware, 0.9f, false, 1e-3f)});
  {
    RuleConfig r = rule(RuleKind::kGapAware, 0.9f, true, 1e-3f);
    r.gap_precision = GapPrecision::kBfloat16;
    cases.push_back({"ga_snapshot_bf16", r});
    r = rule(RuleKind::kGapAware, 0.0f, false, 1e-3f);
    r.gap_source = GapSource::kEcho;
    r.penalize_weight_decay = false;
    cases.push_back({"ga_echo_mom0", r});
  }
  cases.push_back({"dana_zero", rule(RuleKind::kDanaZero, 0.9f, false, 1e-3f)});
  cases.push_back({"dana_slim", rule(RuleKind::kDanaSlim, 0.9f, false, 0.0f)});
  cases.push_back({"ga_dana", rule(RuleKind::kGapAwareDana, 0.9f, false, 1e-3f)});
  {
    RuleConfig r = rule(RuleKind::kDcAsgd, 0.9f, false, 1e-3f);
    r.dc_adaptive = true;
    cases.push_back({"dc_adaptive", r});
  }
  {
    RuleConfig r = rule(RuleKind::kSync, 0.9f, true, 1e-3f);
    r.backup_workers = 1;
    cases.push_back({"sync", r});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(LargeModel, ThreadsTest, ::testing::ValuesIn(ThreadCases()),
                         [](const ::testing::TestParamInfo<ThreadCase>& info) {
                           return info.param.name;
                         });

// GA on the large model with three threads, against the reference,
// including the per-tensor statistics of tensors split across threads.
TEST(ThreadsReferenceTest, GapAwareLargeModelMatchesReference) {
  const ParameterLayout layout = LargeLayout();
  const size_t p = layout.size();
  RuleConfig rule;
  rule.kind = RuleKind::kGapAware;
  rule.momentum = 0.9f;
  rule.weight_decay = 1e-3f;
  rule.num_threads = 3;
  rule.gap_precision = GapPrecision::kBfloat16;
  uint64_t state = 1234567ull;
  const Vec theta0 = FastVec(&state, p, 1.0f);
  ScheduleConfig schedule;
  schedule.learning_rate = 0.05;
  auto e = MakeEngine(layout, rule, schedule, theta0);
  ASSERT_TRUE(e);
  ref::GapAwareRef reference(theta0, rule.momentum, rule.nesterov, rule.weight_decay,
                             rule.penalize_weight_decay, rule.gap_beta, rule.gap_epsilon,
                             Ranges(layout));
  const int kWorkers = 3;
  std::vector<uint64_t> base(kWorkers);
  std::vector<Vec> copy(kWorkers);
  for (int w = 0; w < kWorkers; ++w) {
    ASSERT_TRUE(e->Join(w).ok());
    copy[w] = ref::RefRoundBf16(PullVec(e.get(), w, &base[w]));
  }
  for (int step = 0; step < 6; ++step) {
    const int w = step % kWorkers;
    const Vec g = FastVec(&state, p, 1.0f);
    const uint64_t version = e->version();
    ApplyStats s;
    ASSERT_TRUE(e->Push(Request(w, base[w], g), &s).ok());
    ref::RefPush rp;
    rp.worker = w;
    rp.gradient = &g;
    rp.copy = &copy[w];
    rp.copy_is_bf16 = true;
    rp.staleness = version - base[w];
    rp.learning_rate = 0.05;
    const ref::RefStats expected = reference.Push(rp);
    EXPECT_EQ(s.staleness, rp.staleness);
    ASSERT_TRUE(VecNear(e->store().params(), reference.theta, kRtol, kGapAtol)) << step;
    reference.theta.assign(e->store().params(), e->store().params() + p);
    EXPECT_TRUE(GapStatsNear(s.gap, expected.gap, p)) << step;
    ASSERT_EQ(s.per_tensor.size(), 3u);
    for (size_t t = 0; t < 3; ++t) {
      EXPECT_TRUE(GapStatsNear(s.per_tensor[t], expected.per_tensor[t],
                               layout.tensors()[t].size))
          << step << " tensor " << t;
    }
    if (step % 2 == 1) copy[w] = ref::RefRoundBf16(PullVec(e.get(), w, &base[w]));
  }
}

}  // namespace
}  // namespace gaptrain
