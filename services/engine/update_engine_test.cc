// UpdateEngine: membership, versions and learning rates, memory per rule,
// and validation (every rejected push leaves the store bit-identical, is
// counted by reason, and names the problem).

#include "services/engine/update_engine.h"

#include <array>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "services/engine/apply_stats.h"
#include "services/engine/learning_rate_schedule.h"
#include "services/engine/parameter_layout.h"
#include "services/engine/parameter_store.h"
#include "services/engine/rules/rule_config.h"
#include "services/numeric/bfloat16.h"

namespace gaptrain {
namespace {

using Code = Status::Code;
using Outcome = ApplyStats::Outcome;
using Vec = std::vector<float>;

constexpr size_t kNumReasons = static_cast<size_t>(RejectReason::kNumReasons);

// Three tensors, 997 parameters. Names carry no digits so a message check
// for an index cannot match the name.
ParameterLayout TestLayout() {
  ParameterLayout layout;
  EXPECT_TRUE(layout.Add("enc.weight", {24, 25}).ok());  // [0, 600)
  EXPECT_TRUE(layout.Add("enc.bias", {7}).ok());         // [600, 607)
  EXPECT_TRUE(layout.Add("dec.weight", {13, 30}).ok());  // [607, 997)
  return layout;
}

constexpr size_t kP = 997;

Vec RandomVec(std::mt19937* rng, size_t n, float stddev) {
  std::normal_distribution<float> normal(0.0f, stddev);
  Vec v(n);
  for (float& x : v) x = normal(*rng);
  return v;
}

std::unique_ptr<UpdateEngine> MakeEngine(const RuleConfig& rule,
                                         const ScheduleConfig& schedule = ScheduleConfig(),
                                         uint32_t seed = 3) {
  UpdateEngine::Options options;
  options.rule = rule;
  options.schedule = schedule;
  std::unique_ptr<UpdateEngine> engine;
  Status s = UpdateEngine::Create(TestLayout(), options, &engine);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok() || engine == nullptr) return nullptr;
  std::mt19937 rng(seed);
  const Vec theta0 = RandomVec(&rng, kP, 0.5f);
  std::copy(theta0.begin(), theta0.end(), engine->mutable_store()->params());
  return engine;
}

RuleConfig Rule(RuleKind kind, float momentum = 0.0f, float wd = 0.0f) {
  RuleConfig r;
  r.kind = kind;
  r.momentum = momentum;
  r.weight_decay = wd;
  return r;
}

PushRequest Request(WorkerId worker, uint64_t base, const Vec& g) {
  PushRequest r;
  r.worker = worker;
  r.base_version = base;
  r.gradient = GradientView(g.data(), g.size());
  return r;
}

PushRequest WithEcho(PushRequest r, const Vec& echo) {
  r.echo.dtype = DType::kFloat32;
  r.echo.data = echo.data();
  r.echo_size = echo.size();
  return r;
}

PushRequest WithEcho(PushRequest r, const std::vector<bf16_t>& echo) {
  r.echo.dtype = DType::kBfloat16;
  r.echo.data = echo.data();
  r.echo_size = echo.size();
  return r;
}

Vec Pull(UpdateEngine* e, WorkerId w, uint64_t* version) {
  Vec out(e->store().size(), -1.0f);
  Status s = e->Pull(w, out.data(), out.size(), version);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

Vec Params(const UpdateEngine& e) {
  return Vec(e.store().params(), e.store().params() + e.store().size());
}

// Everything observable about an engine's state, byte for byte.
struct Image {
  std::vector<uint8_t> params;
  std::map<std::string, std::tuple<DType, size_t, std::vector<uint8_t>>> buffers;
  std::map<std::string, double> scalars;
  uint64_t version = 0;
  size_t memory = 0;
  size_t workers = 0;
  std::array<uint64_t, kNumReasons> rejected{};
  uint64_t applied = 0;
  uint64_t discarded_late = 0;
};

Image Capture(const UpdateEngine& e) {
  Image im;
  const ParameterStore& s = e.store();
  const uint8_t* p = reinterpret_cast<const uint8_t*>(s.params());
  im.params.assign(p, p + s.size() * sizeof(float));
  for (const auto& [name, b] : s.buffers()) {
    const uint8_t* d = static_cast<const uint8_t*>(b.data());
    im.buffers[name] = {b.dtype(), b.size(), std::vector<uint8_t>(d, d + b.bytes())};
  }
  im.scalars = s.scalars();
  im.version = s.version();
  im.memory = s.MemoryBytes();
  im.workers = e.num_workers();
  for (size_t r = 0; r < kNumReasons; ++r)
    im.rejected[r] = e.rejected(static_cast<RejectReason>(r));
  im.applied = e.applied();
  im.discarded_late = e.discarded_late();
  return im;
}

// The store is bit-identical (params and every buffer compared with memcmp).
::testing::AssertionResult SameStore(const Image& a, const Image& b) {
  if (a.params.size() != b.params.size() ||
      std::memcmp(a.params.data(), b.params.data(), a.params.size()) != 0) {
    return ::testing::AssertionFailure() << "parameters changed";
  }
  if (a.buffers.size() != b.buffers.size()) {
    return ::testing::AssertionFailure()
           << "buffer count " << a.buffers.size() << " -> " << b.buffers.size();
  }
  for (const auto& [name, buf] : a.buffers) {
    auto it = b.buffers.find(name);
    if (it == b.buffers.end()) return ::testing::AssertionFailure() << "buffer " << name << " gone";
    const auto& [dtype, size, bytes] = buf;
    const auto& [dtype2, size2, bytes2] = it->second;
    if (dtype != dtype2 || size != size2 || bytes.size() != bytes2.size() ||
        std::memcmp(bytes.data(), bytes2.data(), bytes.size()) != 0) {
      return ::testing::AssertionFailure() << "buffer " << name << " changed";
    }
  }
  if (a.scalars != b.scalars) return ::testing::AssertionFailure() << "scalars changed";
  if (a.version != b.version) {
    return ::testing::AssertionFailure() << "version " << a.version << " -> " << b.version;
  }
  if (a.memory != b.memory) return ::testing::AssertionFailure() << "memory changed";
  if (a.workers != b.workers) return ::testing::AssertionFailure() << "membership changed";
  if (a.applied != b.applied) return ::testing::AssertionFailure() << "applied() changed";
  if (a.discarded_late != b.discarded_late) {
    return ::testing::AssertionFailure() << "discarded_late() changed";
  }
  return ::testing::AssertionSuccess();
}

// Exactly `reason` went up by one.
::testing::AssertionResult CountedOnce(const Image& before, const Image& after,
                                       RejectReason reason) {
  for (size_t r = 0; r < kNumReasons; ++r) {
    const uint64_t want = before.rejected[r] + (r == static_cast<size_t>(reason) ? 1 : 0);
    if (after.rejected[r] != want) {
      return ::testing::AssertionFailure()
             << RejectReasonName(static_cast<RejectReason>(r)) << ": " << before.rejected[r]
             << " -> " << after.rejected[r] << ", expected " << want;
    }
  }
  return ::testing::AssertionSuccess();
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// ------------------------------------------------------------- basics

TEST(UpdateEngineTest, RejectReasonNames) {
  EXPECT_STREQ(RejectReasonName(RejectReason::kUnknownWorker), "unknown_worker");
  EXPECT_STREQ(RejectReasonName(RejectReason::kWrongSize), "wrong_size");
  std::set<std::string> names;
  for (size_t r = 0; r < kNumReasons; ++r) {
    const std::string n = RejectReasonName(static_cast<RejectReason>(r));
    EXPECT_FALSE(n.empty());
    for (char c : n) EXPECT_TRUE(std::islower(static_cast<unsigned char>(c)) || c == '_') << n;
    names.insert(n);
  }
  EXPECT_EQ(names.size(), kNumReasons) << "metric labels must be distinct";
}

TEST(UpdateEngineTest, CreateValidatesOptions) {
  std::unique_ptr<UpdateEngine> engine;
  UpdateEngine::Options bad_rule;
  bad_rule.rule.num_threads = 0;
  EXPECT_FALSE(UpdateEngine::Create(TestLayout(), bad_rule, &engine).ok());
  EXPECT_EQ(engine, nullptr);

  UpdateEngine::Options bad_momentum;
  bad_momentum.rule.momentum = 1.5f;
  EXPECT_FALSE(UpdateEngine::Create(TestLayout(), bad_momentum, &engine).ok());
  EXPECT_EQ(engine, nullptr);

  UpdateEngine::Options bad_schedule;
  bad_schedule.schedule.learning_rate = -1.0;
  Status s = UpdateEngine::Create(TestLayout(), bad_schedule, &engine);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(engine, nullptr);

  UpdateEngine::Options good;
  ASSERT_TRUE(UpdateEngine::Create(TestLayout(), good, &engine).ok());
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->store().size(), kP);
  EXPECT_EQ(engine->version(), 0u);
  EXPECT_EQ(engine->num_workers(), 0u);
  EXPECT_TRUE(engine->store().layout() == TestLayout());
  for (size_t j = 0; j < kP; ++j) ASSERT_EQ(engine->store().params()[j], 0.0f);
}

TEST(UpdateEngineTest, Membership) {
  auto e = MakeEngine(Rule(RuleKind::kAsgd));
  ASSERT_TRUE(e);
  EXPECT_FALSE(e->IsMember(1));
  ASSERT_TRUE(e->Join(1).ok());
  ASSERT_TRUE(e->Join(2).ok());
  EXPECT_TRUE(e->IsMember(1));
  EXPECT_EQ(e->num_workers(), 2u);
  EXPECT_EQ(e->Join(1).code(), Code::kAlreadyExists);
  EXPECT_EQ(e->num_workers(), 2u);
  EXPECT_EQ(e->Leave(7).code(), Code::kNotFound);
  ASSERT_TRUE(e->Leave(1).ok());
  EXPECT_FALSE(e->IsMember(1));
  EXPECT_EQ(e->num_workers(), 1u);
  EXPECT_EQ(e->Leave(1).code(), Code::kNotFound);
  ASSERT_TRUE(e->Join(1).ok());  // may rejoin
  EXPECT_EQ(e->num_workers(), 2u);
}

TEST(UpdateEngineTest, PullChecksWorkerAndSize) {
  RuleConfig rule = Rule(RuleKind::kGapAware, 0.9f);
  auto e = MakeEngine(rule);
  ASSERT_TRUE(e);
  ASSERT_TRUE(e->Join(0).ok());
  const Image before = Capture(*e);
  Vec out(kP);
  uint64_t version = 0;
  EXPECT_EQ(e->Pull(5, out.data(), kP, &version).code(), Code::kNotFound);
  Vec small(kP - 1);
  EXPECT_FALSE(e->Pull(0, small.data(), small.size(), &version).ok());
  EXPECT_TRUE(SameStore(before, Capture(*e)));
  // A failed pull recorded no snapshot: a push is still refused.
  const Vec g(kP, 0.1f);
  ApplyStats stats;
  EXPECT_FALSE(e->Push(Request(0, 0, g), &stats).ok());
  EXPECT_EQ(e->rejected(RejectReason::kNoWorkerCopy), 1u);
}

TEST(UpdateEngineTest, PullReturnsParamsAndVersion) {
  auto e = MakeEngine(Rule(RuleKind::kAsgd));
  ASSERT_TRUE(e);
  ASSERT_TRUE(e->Join(0).ok());
  uint64_t version = 77;
  const Vec out = Pull(e.get(), 0, &version);
  EXPECT_EQ(version, 0u);
  EXPECT_EQ(std::memcmp(out.data(), e->store().params(), kP * sizeof(float)), 0);
  const Vec g(kP, 1.0f);
  ApplyStats stats;
  ASSERT_TRUE(e->Push(Request(0, 0, g), &stats).ok());
  Pull(e.get(), 0, &version);
  EXPECT_EQ(version, 1u);
}

// maxUpdates: once θ is at that version a valid push is discarded, θ
// untouched, so the job ends at exactly that many updates; an invalid
// one is still refused as such.
TEST(UpdateEngineTest, PushesPastMaxUpdatesAreDiscarded) {
  UpdateEngine::Options options;
  options.rule = Rule(RuleKind::kAsgd);
  options.max_updates = 2;
  std::unique_ptr<UpdateEngine> e;
  ASSERT_TRUE(UpdateEngine::Create(TestLayout(), options, &e).ok());
  ASSERT_TRUE(e->Join(0).ok());
  const Vec g(kP, 1.0f);
  ApplyStats stats;
  for (uint64_t v = 0; v < 2; ++v) {
    ASSERT_TRUE(e->Push(Request(0, v, g), &stats).ok());
    EXPECT_EQ(stats.outcome, Outcome::kApplied);
  }
  const Vec theta(e->store().params(), e->store().params() + kP);
  ASSERT_TRUE(e->Push(Request(0, 1, g), &stats).ok());
  EXPECT_EQ(stats.outcome, Outcome::kDiscardedFinished);
  EXPECT_EQ(stats.staleness, 1u);
  EXPECT_EQ(stats.learning_rate, 0.0);
  EXPECT_EQ(e->version(), 2u);
  EXPECT_EQ(std::memcmp(theta.data(), e->store().params(), kP * sizeof(float)), 0);
  EXPECT_EQ(e->discarded_finished(), 1u);
  EXPECT_EQ(e->applied(), 2u);
  EXPECT_EQ(e->Push(Request(0, 3, g), &stats).code(), Code::kOutOfRange);  // from the future
}

// τ = version at push − base version; η = schedule.At(version before the
// update); the version moves by one per applied update.
// MasterService shares one reply per reply_generation(), so the generation
// must move on everything that can change a reply, and only then.
TEST(UpdateEngineTest, ReplyGenerationMovesWhenAReplyMayChange) {
  auto e = MakeEngine(Rule(RuleKind::kDanaZero, 0.9f));
  ASSERT_TRUE(e);
  uint64_t generation = e->reply_generation();
  auto moved = [&] {
    const bool m = e->reply_generation() != generation;
    generation = e->reply_generation();
    return m;
  };
  ASSERT_TRUE(e->Join(0).ok());
  EXPECT_TRUE(moved());
  ASSERT_TRUE(e->Join(1).ok());
  EXPECT_TRUE(moved());
  uint64_t v0 = 0, v1 = 0;
  const Vec reply = Pull(e.get(), 0, &v0);
  Pull(e.get(), 1, &v1);
  Vec model(kP);
  ASSERT_TRUE(e->PullModel(model.data(), kP, &v0).ok());
  EXPECT_TRUE(e->NeedsPull(0, -1));
  EXPECT_FALSE(moved());  // reading changes nothing
  EXPECT_EQ(Pull(e.get(), 1, &v1), reply);  // the same reply for every worker

  std::mt19937 rng(5);
  ApplyStats stats;
  ASSERT_TRUE(e->Push(Request(0, v0, RandomVec(&rng, kP, 1.0f)), &stats).ok());
  EXPECT_TRUE(moved());
  Vec bad = RandomVec(&rng, kP, 1.0f);
  bad[3] = std::nanf("");
  EXPECT_FALSE(e->Push(Request(0, e->version(), bad), &stats).ok());
  EXPECT_FALSE(moved());  // rejected: nothing changed

  // DANA: a leaving worker's momentum leaves S, so the look-ahead changes
  // although the version does not.
  const uint64_t version = e->version();
  const Vec before = Pull(e.get(), 1, &v1);
  EXPECT_FALSE(e->NeedsPull(1, static_cast<int64_t>(version)));  // holds this reply
  ASSERT_TRUE(e->Leave(0).ok());
  EXPECT_TRUE(moved());
  EXPECT_EQ(e->version(), version);
  // Same version, new point: worker 1 must not be told it is up to date.
  EXPECT_TRUE(e->NeedsPull(1, static_cast<int64_t>(version)));
  EXPECT_NE(Pull(e.get(), 1, &v1), before);
  EXPECT_FALSE(e->NeedsPull(1, static_cast<int64_t>(version)));

  e->mutable_store();
  EXPECT_TRUE(moved());
}

// A sync worker waiting for its step holds the current reply: pushes that
// leave the version alone must not make every poll resend the model.
TEST(UpdateEngineTest, SyncWorkersWaitingForTheStepNeedNoPull) {
  auto e = MakeEngine(Rule(RuleKind::kSync));
  ASSERT_TRUE(e);
  ASSERT_TRUE(e->Join(0).ok());
  ASSERT_TRUE(e->Join(1).ok());  // a step needs both gradients
  uint64_t v0 = 0, v1 = 0;
  Pull(e.get(), 0, &v0);
  Pull(e.get(), 1, &v1);
  std::mt19937 rng(9);
  ApplyStats stats;
  ASSERT_TRUE(e->Push(Request(0, v0, RandomVec(&rng, kP, 1.0f)), &stats).ok());
  ASSERT_EQ(stats.outcome, ApplyStats::Outcome::kAccumulated);
  EXPECT_FALSE(e->NeedsPull(0, static_cast<int64_t>(v0)));
  EXPECT_FALSE(e->NeedsPull(1, static_cast<int64_t>(v1)));
  ASSERT_TRUE(e->Push(Request(1, v1, RandomVec(&rng, kP, 1.0f)), &stats).ok());
  ASSERT_EQ(stats.outcome, ApplyStats::Outcome::kApplied);
  EXPECT_TRUE(e->NeedsPull(0, static_cast<int64_t>(v0)));  // the step moved θ
  EXPECT_TRUE(e->NeedsPull(0, static_cast<int64_t>(e->version())));  // never pulled it
  Pull(e.get(), 0, &v0);
  EXPECT_FALSE(e->NeedsPull(0, static_cast<int64_t>(v0)));
}

// PullFrom records a reply the caller already holds exactly as Pull does.
TEST(UpdateEngineTest, PullFromRecordsTheSnapshotLikePull) {
  for (GapPrecision precision : {GapPrecision::kFloat32, GapPrecision::kBfloat16}) {
    RuleConfig rule = Rule(RuleKind::kGapAware, 0.9f);
    rule.gap_precision = precision;
    auto by_pull = MakeEngine(rule);
    auto by_pull_from = MakeEngine(rule);
    ASSERT_TRUE(by_pull && by_pull_from);
    for (UpdateEngine* e : {by_pull.get(), by_pull_from.get()}) {
      ASSERT_TRUE(e->Join(0).ok());
      ASSERT_TRUE(e->Join(1).ok());
    }
    std::mt19937 rng(11);
    for (int step = 0; step < 3; ++step) {
      uint64_t v = 0;
      const Vec reply = Pull(by_pull_from.get(), 0, &v);  // the reply another pull wrote
      uint64_t a = 0, b = 0;
      Pull(by_pull.get(), 1, &a);
      ASSERT_TRUE(by_pull_from->PullFrom(1, reply.data(), reply.size(), &b).ok());
      EXPECT_EQ(a, b);
      const Vec g = RandomVec(&rng, kP, 1.0f);
      ApplyStats s1, s2;
      ASSERT_TRUE(by_pull->Push(Request(1, a, g), &s1).ok());
      ASSERT_TRUE(by_pull_from->Push(Request(1, b, g), &s2).ok());
      EXPECT_EQ(Params(*by_pull), Params(*by_pull_from));
      EXPECT_EQ(s1.gap.gap_mean, s2.gap.gap_mean);
    }
    uint64_t v = 0;
    EXPECT_EQ(by_pull->PullFrom(7, Params(*by_pull).data(), kP, &v).code(),
              Status::Code::kNotFound);
    EXPECT_EQ(by_pull->PullFrom(0, Params(*by_pull).data(), kP - 1, &v).code(),
              Status::Code::kInvalidArgument);
  }
}

// A caller that checked finiteness itself (known_finite) gets the same
// update; without the flag the engine still rejects NaN and Inf itself.
TEST(UpdateEngineTest, KnownFiniteSkipsOnlyTheScan) {
  auto checked = MakeEngine(Rule(RuleKind::kAsgd, 0.9f));
  auto trusted = MakeEngine(Rule(RuleKind::kAsgd, 0.9f));
  ASSERT_TRUE(checked && trusted);
  ASSERT_TRUE(checked->Join(0).ok());
  ASSERT_TRUE(trusted->Join(0).ok());
  std::mt19937 rng(2);
  const Vec g = RandomVec(&rng, kP, 1.0f);
  ApplyStats stats;
  PushRequest request = Request(0, 0, g);
  ASSERT_TRUE(checked->Push(request, &stats).ok());
  request.known_finite = true;
  ASSERT_TRUE(trusted->Push(request, &stats).ok());
  EXPECT_EQ(Params(*checked), Params(*trusted));

  Vec bad = g;
  bad[kP - 1] = std::numeric_limits<float>::infinity();
  RejectReason reason = RejectReason::kNumReasons;
  EXPECT_EQ(checked->Push(Request(0, 1, bad), &stats, &reason).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(reason, RejectReason::kNonFinite);
  EXPECT_EQ(Params(*checked), Params(*trusted));
}

TEST(UpdateEngineTest, StalenessLearningRateAndVersion) {
  ScheduleConfig schedule;
  schedule.learning_rate = 0.2;
  schedule.warmup_updates = 8;
  schedule.warmup_start_factor = 0.25;
  schedule.decay_at_fractions = {0.75};
  schedule.decay_factor = 0.5;
  schedule.total_updates = 16;
  LearningRateSchedule reference(schedule);
  auto e = MakeEngine(Rule(RuleKind::kAsgd), schedule);
  ASSERT_TRUE(e);
  for (WorkerId w = 0; w < 3; ++w) ASSERT_TRUE(e->Join(w).ok());
  std::vector<uint64_t> base(3, 0);
  for (WorkerId w = 0; w < 3; ++w) Pull(e.get(), w, &base[w]);
  std::mt19937 rng(5);
  for (int step = 0; step < 20; ++step) {
    const WorkerId w = step % 3;
    const uint64_t version = e->version();
    ASSERT_EQ(version, static_cast<uint64_t>(step));
    EXPECT_DOUBLE_EQ(e->learning_rate(), reference.At(version));
    const Vec g = RandomVec(&rng, kP, 1.0f);
    const Vec before = Params(*e);
    ApplyStats stats;
    ASSERT_TRUE(e->Push(Request(w, base[w], g), &stats).ok());
    EXPECT_EQ(stats.outcome, Outcome::kApplied);
    EXPECT_EQ(stats.staleness, version - base[w]);
    EXPECT_DOUBLE_EQ(stats.learning_rate, reference.At(version));
    EXPECT_EQ(e->version(), version + 1);
    EXPECT_EQ(e->applied(), static_cast<uint64_t>(step + 1));
    // Plain ASGD: θ ← θ − η g exactly.
    const float lr = static_cast<float>(reference.At(version));
    for (size_t j = 0; j < kP; ++j) {
      ASSERT_NEAR(e->store().params()[j], before[j] - lr * g[j],
                  1e-6f * (1.0f + std::fabs(before[j])))
          << "step " << step << " element " << j;
    }
    if (step % 2 == 0) Pull(e.get(), w, &base[w]);  // others keep older copies
  }
}

// ---------------------------------------------------------- memory

struct MemoryCase {
  std::string name;
  RuleConfig rule;
  // Expected bytes with n joined workers, in units of P floats / bf16.
  std::function<size_t(size_t n)> bytes;
};

std::ostream& operator<<(std::ostream& os, const MemoryCase& c) { return os << c.name; }

class MemoryTest : public ::testing::TestWithParam<MemoryCase> {};

TEST_P(MemoryTest, MatchesTheDesign) {
  const MemoryCase& c = GetParam();
  auto e = MakeEngine(c.rule);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->store().MemoryBytes(), c.bytes(0)) << "no workers";
  for (WorkerId w = 0; w < 3; ++w) ASSERT_TRUE(e->Join(w).ok());
  EXPECT_EQ(e->store().MemoryBytes(), c.bytes(3)) << "after 3 joins";
  // Pulls and pushes do not allocate more.
  std::mt19937 rng(9);
  for (int round = 0; round < 2; ++round) {
    for (WorkerId w = 0; w < 3; ++w) {
      uint64_t v = 0;
      const Vec point = Pull(e.get(), w, &v);
      const Vec g = RandomVec(&rng, kP, 1.0f);
      PushRequest req = Request(w, v, g);
      if (c.rule.NeedsWorkerCopy() && c.rule.gap_source == GapSource::kEcho) {
        req = WithEcho(req, point);
      }
      ApplyStats stats;
      ASSERT_TRUE(e->Push(req, &stats).ok());
    }
  }
  EXPECT_EQ(e->store().MemoryBytes(), c.bytes(3)) << "after pulls and pushes";
  ASSERT_TRUE(e->Leave(1).ok());
  EXPECT_EQ(e->store().MemoryBytes(), c.bytes(2)) << "after a leave";
  ASSERT_TRUE(e->Join(8).ok());
  EXPECT_EQ(e->store().MemoryBytes(), c.bytes(3)) << "after a new join";
}

std::vector<MemoryCase> MemoryCases() {
  const size_t P = kP;
  std::vector<MemoryCase> cases;
  auto snapshot = [](RuleConfig r, GapPrecision precision) {
    r.gap_source = GapSource::kSnapshot;
    r.gap_precision = precision;
    return r;
  };
  auto echo = [](RuleConfig r) {
    r.gap_source = GapSource::kEcho;
    return r;
  };
  cases.push_back({"asgd_mom0", Rule(RuleKind::kAsgd), [=](size_t) { return 4 * P; }});
  cases.push_back({"asgd_mom", Rule(RuleKind::kAsgd, 0.9f), [=](size_t) { return 8 * P; }});
  cases.push_back(
      {"sa_mom0", Rule(RuleKind::kStalenessAware), [=](size_t) { return 4 * P; }});
  cases.push_back(
      {"sa_mom", Rule(RuleKind::kStalenessAware, 0.9f), [=](size_t) { return 8 * P; }});
  cases.push_back({"ga_snapshot_fp32_mom",
                   snapshot(Rule(RuleKind::kGapAware, 0.9f), GapPrecision::kFloat32),
                   [=](size_t n) { return 12 * P + n * 4 * P; }});
  cases.push_back({"ga_snapshot_bf16_mom",
                   snapshot(Rule(RuleKind::kGapAware, 0.9f), GapPrecision::kBfloat16),
                   [=](size_t n) { return 12 * P + n * 2 * P; }});
  cases.push_back({"ga_snapshot_bf16_mom0",
                   snapshot(Rule(RuleKind::kGapAware), GapPrecision::kBfloat16),
                   [=](size_t n) { return 8 * P + n * 2 * P; }});
  cases.push_back({"ga_echo_mom", echo(Rule(RuleKind::kGapAware, 0.9f)),
                   [=](size_t) { return 12 * P; }});
  cases.push_back({"ga_echo_mom0", echo(Rule(RuleKind::kGapAware)),
                   [=](size_t) { return 8 * P; }});
  cases.push_back({"dana_zero", Rule(RuleKind::kDanaZero, 0.9f),
                   [=](size_t n) { return 8 * P + n * 4 * P; }});
  cases.push_back({"dana_slim", Rule(RuleKind::kDanaSlim, 0.9f, 1e-4f),
                   [=](size_t) { return 4 * P; }});
  cases.push_back({"ga_dana_snapshot_fp32",
                   snapshot(Rule(RuleKind::kGapAwareDana, 0.9f), GapPrecision::kFloat32),
                   [=](size_t n) { return 12 * P + n * 4 * P + n * 4 * P; }});
  cases.push_back({"ga_dana_snapshot_bf16",
                   snapshot(Rule(RuleKind::kGapAwareDana, 0.9f), GapPrecision::kBfloat16),
                   [=](size_t n) { return 12 * P + n * 4 * P + n * 2 * P; }});
  cases.push_back({"ga_dana_echo", echo(Rule(RuleKind::kGapAwareDana, 0.9f)),
                   [=](size_t n) { return 12 * P + n * 4 * P; }});
  {
    RuleConfig r = snapshot(Rule(RuleKind::kDcAsgd), GapPrecision::kFloat32);
    cases.push_back({"dc_constant_mom0_snapshot_fp32", r,
                     [=](size_t n) { return 4 * P + n * 4 * P; }});
    r = snapshot(Rule(RuleKind::kDcAsgd, 0.9f), GapPrecision::kBfloat16);
    r.dc_adaptive = true;
    cases.push_back({"dc_adaptive_mom_snapshot_bf16", r,
                     [=](size_t n) { return 12 * P + n * 2 * P; }});
    r = echo(Rule(RuleKind::kDcAsgd, 0.9f));
    cases.push_back({"dc_constant_mom_echo", r, [=](size_t) { return 8 * P; }});
    r = echo(Rule(RuleKind::kDcAsgd));
    r.dc_adaptive = true;
    cases.push_back({"dc_adaptive_mom0_echo", r, [=](size_t) { return 8 * P; }});
  }
  cases.push_back({"sync_mom0", Rule(RuleKind::kSync), [=](size_t) { return 8 * P; }});
  {
    RuleConfig r = Rule(RuleKind::kSync, 0.9f);
    r.backup_workers = 1;
    cases.push_back({"sync_mom", r, [=](size_t) { return 12 * P; }});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllRules, MemoryTest, ::testing::ValuesIn(MemoryCases()),
                         [](const ::testing::TestParamInfo<MemoryCase>& info) {
                           return info.param.name;
                         });

// -------------------------------------------------------- bad input

// An engine with some history (non-zero state), three workers that pulled.
struct Warm {
  std::unique_ptr<UpdateEngine> engine;
  std::vector<uint64_t> base;
  std::vector<Vec> point;
  bool echo = false;
};

Warm MakeWarm(const RuleConfig& rule, int pushes = 6) {
  Warm w;
  w.engine = MakeEngine(rule);
  if (!w.engine) return w;
  w.echo = rule.NeedsWorkerCopy() && rule.gap_source == GapSource::kEcho;
  w.base.resize(3);
  w.point.resize(3);
  for (WorkerId id = 0; id < 3; ++id) EXPECT_TRUE(w.engine->Join(id).ok());
  std::mt19937 rng(11);
  for (int i = 0; i < pushes; ++i) {
    const WorkerId id = i % 3;
    uint64_t v = 0;
    Vec point = Pull(w.engine.get(), id, &v);
    const Vec g = RandomVec(&rng, kP, 1.0f);
    PushRequest req = Request(id, v, g);
    if (w.echo) req = WithEcho(req, point);
    ApplyStats stats;
    EXPECT_TRUE(w.engine->Push(req, &stats).ok());
  }
  for (WorkerId id = 0; id < 3; ++id) w.point[id] = Pull(w.engine.get(), id, &w.base[id]);
  return w;
}

// Pushes `req` and expects a rejection, counted once under `reason`, that
// leaves the store as it was.
Status ExpectRejectedUnchanged(UpdateEngine* e, const PushRequest& req, RejectReason reason) {
  const Image before = Capture(*e);
  ApplyStats stats;
  Status s = e->Push(req, &stats);
  EXPECT_FALSE(s.ok()) << RejectReasonName(reason);
  const Image after = Capture(*e);
  EXPECT_TRUE(SameStore(before, after)) << RejectReasonName(reason) << ": " << s.ToString();
  EXPECT_TRUE(CountedOnce(before, after, reason)) << s.ToString();
  return s;
}

// `n` updates from worker `id`, each on the version it pulled just before
// (staleness 0), with their outcomes appended to `outcomes` if given.
void PushFresh(UpdateEngine* e, WorkerId id, int n, std::mt19937* rng,
               std::vector<Outcome>* outcomes = nullptr) {
  for (int i = 0; i < n; ++i) {
    uint64_t v = 0;
    Pull(e, id, &v);
    ApplyStats stats;
    ASSERT_TRUE(e->Push(Request(id, v, RandomVec(rng, kP, 1.0f)), &stats).ok());
    if (outcomes != nullptr) outcomes->push_back(stats.outcome);
  }
}

// Runs `check` on a warm engine of each rule that keeps a copy of every
// worker's θ, the copy taken from `source`.
template <typename Check>
void ForEachWorkerCopyRule(GapSource source, const Check& check) {
  for (RuleKind kind : {RuleKind::kGapAware, RuleKind::kGapAwareDana, RuleKind::kDcAsgd}) {
    SCOPED_TRACE(RuleKindName(kind));
    RuleConfig rule = Rule(kind, 0.9f);
    rule.gap_source = source;
    Warm w = MakeWarm(rule);
    ASSERT_TRUE(w.engine);
    check(w);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

struct BadInputCase {
  std::string name;
  RuleConfig rule;
};

std::ostream& operator<<(std::ostream& os, const BadInputCase& c) { return os << c.name; }

class BadInputTest : public ::testing::TestWithParam<BadInputCase> {
 protected:
  void SetUp() override {
    warm_ = MakeWarm(GetParam().rule);
    ASSERT_TRUE(warm_.engine);
    good_g_ = Vec(kP, 0.25f);
  }

  // A request from worker 0 that would be accepted.
  PushRequest Good() {
    PushRequest r = Request(0, warm_.base[0], good_g_);
    if (warm_.echo) r = WithEcho(r, warm_.point[0]);
    return r;
  }

  // Pushes `req`, expects rejection with `code` (or any error when
  // `code` is kOk), counted under `reason`, and an unchanged store.
  Status ExpectRejected(const PushRequest& req, RejectReason reason, Code code) {
    Status s = ExpectRejectedUnchanged(warm_.engine.get(), req, reason);
    if (code != Code::kOk) {
      EXPECT_EQ(s.code(), code) << s.ToString();
    }
    EXPECT_FALSE(s.message().empty());
    return s;
  }

  Warm warm_;
  Vec good_g_;
};

TEST_P(BadInputTest, UnknownWorker) {
  PushRequest r = Good();
  r.worker = 42;
  ExpectRejected(r, RejectReason::kUnknownWorker, Code::kNotFound);
  // A worker that left is unknown too.
  ASSERT_TRUE(warm_.engine->Leave(2).ok());
  r = Good();
  r.worker = 2;
  ExpectRejected(r, RejectReason::kUnknownWorker, Code::kNotFound);
}

TEST_P(BadInputTest, WrongGradientSize) {
  Vec shorter(kP - 1, 0.1f), longer(kP + 1, 0.1f);
  PushRequest r = Good();
  r.gradient = GradientView(shorter.data(), shorter.size());
  ExpectRejected(r, RejectReason::kWrongSize, Code::kInvalidArgument);
  r.gradient = GradientView(longer.data(), longer.size());
  ExpectRejected(r, RejectReason::kWrongSize, Code::kInvalidArgument);
  r.gradient = GradientView();
  ExpectRejected(r, RejectReason::kWrongSize, Code::kInvalidArgument);
}

TEST_P(BadInputTest, NonFiniteGradientNamesIndexAndTensor) {
  struct Bad {
    size_t index;
    float value;
    const char* tensor;
    size_t element;  // within the tensor
  };
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<Bad> cases = {
      {777, nan, "dec.weight", 170},
      {123, inf, "enc.weight", 123},
      {604, -inf, "enc.bias", 4},
      {996, nan, "dec.weight", 389},
      {0, -nan, "enc.weight", 0},
  };
  for (const Bad& b : cases) {
    SCOPED_TRACE(b.index);
    Vec g = good_g_;
    g[b.index] = b.value;
    PushRequest r = Good();
    r.gradient = GradientView(g.data(), g.size());
    Status s = ExpectRejected(r, RejectReason::kNonFinite, Code::kInvalidArgument);
    EXPECT_TRUE(Contains(s.message(), b.tensor)) << s.message();
    EXPECT_TRUE(Contains(s.message(), std::to_string(b.index)) ||
                Contains(s.message(), std::to_string(b.element)))
        << s.message();
  }
}

TEST_P(BadInputTest, FutureBaseVersion) {
  PushRequest r = Good();
  r.base_version = warm_.engine->version() + 1;
  ExpectRejected(r, RejectReason::kFutureVersion, Code::kOutOfRange);
  r.base_version = warm_.engine->version() + 1000;
  ExpectRejected(r, RejectReason::kFutureVersion, Code::kOutOfRange);
}

TEST_P(BadInputTest, GoodPushIsAcceptedAfterRejections) {
  // The fixture's good request really is good (so the rejections above are
  // about the one thing each case broke).
  PushRequest bad = Good();
  bad.worker = 42;
  ApplyStats stats;
  EXPECT_FALSE(warm_.engine->Push(bad, &stats).ok());
  const uint64_t version = warm_.engine->version();
  ASSERT_TRUE(warm_.engine->Push(Good(), &stats).ok());
  if (GetParam().rule.kind == RuleKind::kSync) {
    EXPECT_NE(stats.outcome, Outcome::kDiscardedLate);
  } else {
    EXPECT_EQ(warm_.engine->version(), version + 1);
  }
}

std::vector<BadInputCase> BadInputCases() {
  std::vector<BadInputCase> cases;
  cases.push_back({"asgd", Rule(RuleKind::kAsgd, 0.9f, 1e-3f)});
  cases.push_back({"sa", Rule(RuleKind::kStalenessAware, 0.9f)});
  {
    RuleConfig r = Rule(RuleKind::kGapAware, 0.9f, 1e-3f);
    r.gap_precision = GapPrecision::kBfloat16;
    r.num_threads = 3;
    cases.push_back({"ga_snapshot_bf16", r});
    r.gap_source = GapSource::kEcho;
    cases.push_back({"ga_echo", r});
  }
  cases.push_back({"dana_zero", Rule(RuleKind::kDanaZero, 0.9f, 1e-3f)});
  cases.push_back({"dana_slim", Rule(RuleKind::kDanaSlim, 0.9f)});
  cases.push_back({"ga_dana_snapshot", Rule(RuleKind::kGapAwareDana, 0.9f, 1e-3f)});
  {
    RuleConfig r = Rule(RuleKind::kDcAsgd, 0.9f);
    r.dc_adaptive = true;
    cases.push_back({"dc_adaptive_snapshot", r});
  }
  {
    RuleConfig r = Rule(RuleKind::kSync, 0.9f);
    r.backup_workers = 1;
    cases.push_back({"sync", r});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllRules, BadInputTest, ::testing::ValuesIn(BadInputCases()),
                         [](const ::testing::TestParamInfo<BadInputCase>& info) {
                           return info.param.name;
                         });

TEST(BadInputSpecificTest, TooStale) {
  RuleConfig rule = Rule(RuleKind::kGapAware, 0.9f);
  rule.max_staleness = 2;
  Warm w = MakeWarm(rule, 0);
  ASSERT_TRUE(w.engine);
  UpdateEngine* e = w.engine.get();
  // Worker 0 holds version 0; worker 1 pushes three fresh updates.
  std::mt19937 rng(4);
  ASSERT_NO_FATAL_FAILURE(PushFresh(e, 1, 3, &rng));
  ASSERT_EQ(e->version(), 3u);
  const Vec g = RandomVec(&rng, kP, 1.0f);
  Status s = ExpectRejectedUnchanged(e, Request(0, 0, g), RejectReason::kTooStale);  // τ = 3 > 2
  EXPECT_TRUE(Contains(s.message(), "3")) << s.message();
  // Worker 0's snapshot is still the one of version 0: after a new pull it
  // may push again.
  uint64_t v = 0;
  Pull(e, 0, &v);
  ApplyStats stats;
  ASSERT_TRUE(e->Push(Request(0, v, g), &stats).ok());
  EXPECT_EQ(e->version(), 4u);
}

TEST(BadInputSpecificTest, StalenessAtTheLimitIsAccepted) {
  RuleConfig rule = Rule(RuleKind::kAsgd, 0.9f);
  rule.max_staleness = 2;
  auto e = MakeEngine(rule);
  ASSERT_TRUE(e);
  for (WorkerId id = 0; id < 2; ++id) ASSERT_TRUE(e->Join(id).ok());
  std::mt19937 rng(4);
  uint64_t base0 = 0;
  Pull(e.get(), 0, &base0);
  ASSERT_NO_FATAL_FAILURE(PushFresh(e.get(), 1, 2, &rng));
  ApplyStats stats;
  ASSERT_TRUE(e->Push(Request(0, base0, RandomVec(&rng, kP, 1.0f)), &stats).ok());  // τ = 2
  EXPECT_EQ(stats.staleness, 2u);
  EXPECT_EQ(e->version(), 3u);
  Status s = e->Push(Request(0, base0, RandomVec(&rng, kP, 1.0f)), &stats);  // τ = 3
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(e->rejected(RejectReason::kTooStale), 1u);
  EXPECT_EQ(e->version(), 3u);
}

TEST(BadInputSpecificTest, MaxStalenessDoesNotApplyToSync) {
  RuleConfig rule = Rule(RuleKind::kSync);
  rule.max_staleness = 1;
  auto e = MakeEngine(rule);
  ASSERT_TRUE(e);
  ASSERT_TRUE(e->Join(0).ok());
  ASSERT_TRUE(e->Join(1).ok());
  ASSERT_TRUE(e->Leave(1).ok());  // one live worker: every push is a step
  std::mt19937 rng(2);
  uint64_t stale = 0;
  Pull(e.get(), 0, &stale);
  std::vector<Outcome> outcomes;
  ASSERT_NO_FATAL_FAILURE(PushFresh(e.get(), 0, 3, &rng, &outcomes));
  EXPECT_EQ(outcomes, std::vector<Outcome>(3, Outcome::kApplied));
  ASSERT_EQ(e->version(), 3u);
  const Image before = Capture(*e);
  ApplyStats stats;
  Status s = e->Push(Request(0, stale, RandomVec(&rng, kP, 1.0f)), &stats);  // τ = 3
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(stats.outcome, Outcome::kDiscardedLate);
  EXPECT_EQ(stats.staleness, 3u);
  EXPECT_EQ(e->rejected(RejectReason::kTooStale), 0u);
  EXPECT_EQ(e->discarded_late(), 1u);
  Image after = Capture(*e);
  EXPECT_EQ(after.params, before.params);
  EXPECT_EQ(after.version, before.version);
}

TEST(BadInputSpecificTest, SnapshotNeedsAPullOfThatVersion) {
  ForEachWorkerCopyRule(GapSource::kSnapshot, [](Warm& w) {
    UpdateEngine* e = w.engine.get();
    const Vec g(kP, 0.5f);
    // A worker that never pulled.
    ASSERT_TRUE(e->Join(9).ok());
    ExpectRejectedUnchanged(e, Request(9, e->version(), g), RejectReason::kNoWorkerCopy);
    // A base version other than the one of the worker's last pull.
    {
      ApplyStats stats;
      ASSERT_TRUE(e->Push(Request(1, w.base[1], g), &stats).ok());  // moves the version
      ASSERT_GT(e->version(), w.base[0]);
      uint64_t v = 0;
      Pull(e, 0, &v);  // worker 0 now holds the newest version
      ExpectRejectedUnchanged(e, Request(0, w.base[0], g),  // older base
                              RejectReason::kNoWorkerCopy);
      // The right base is accepted.
      ASSERT_TRUE(e->Push(Request(0, v, g), &stats).ok());
    }
    // A worker that left and rejoined must pull again.
    ASSERT_TRUE(e->Leave(2).ok());
    ASSERT_TRUE(e->Join(2).ok());
    ExpectRejectedUnchanged(e, Request(2, e->version(), g), RejectReason::kNoWorkerCopy);
  });
}

TEST(BadInputSpecificTest, EchoChecks) {
  ForEachWorkerCopyRule(GapSource::kEcho, [](Warm& w) {
    UpdateEngine* e = w.engine.get();
    const Vec g(kP, 0.5f);
    // No echo at all.
    ExpectRejectedUnchanged(e, Request(0, w.base[0], g), RejectReason::kNoWorkerCopy);
    // Echo of the wrong length.
    Vec short_echo(w.point[0].begin(), w.point[0].end() - 1);
    Status s = ExpectRejectedUnchanged(e, WithEcho(Request(0, w.base[0], g), short_echo),
                                       RejectReason::kWrongSize);
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    {
      PushRequest r = WithEcho(Request(0, w.base[0], g), w.point[0]);
      r.echo_size = kP + 3;
      ExpectRejectedUnchanged(e, r, RejectReason::kWrongSize);
    }
    // Non-finite echo, fp32 and bf16.
    Vec bad_echo = w.point[0];
    bad_echo[640] = std::numeric_limits<float>::quiet_NaN();
    s = ExpectRejectedUnchanged(e, WithEcho(Request(0, w.base[0], g), bad_echo),
                                RejectReason::kNonFinite);
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_TRUE(Contains(s.message(), "dec.weight")) << s.message();
    EXPECT_TRUE(Contains(s.message(), "640") || Contains(s.message(), "33")) << s.message();
    std::vector<bf16_t> bf(kP);
    FloatsToBf16(w.point[0].data(), kP, bf.data());
    bf[605] = 0x7F80;  // +Inf
    s = ExpectRejectedUnchanged(e, WithEcho(Request(0, w.base[0], g), bf),
                                RejectReason::kNonFinite);
    EXPECT_TRUE(Contains(s.message(), "enc.bias")) << s.message();
    bf[605] = 0xFFC1;  // NaN
    ExpectRejectedUnchanged(e, WithEcho(Request(0, w.base[0], g), bf), RejectReason::kNonFinite);
    // A good bf16 echo is accepted.
    FloatsToBf16(w.point[0].data(), kP, bf.data());
    ApplyStats stats;
    s = e->Push(WithEcho(Request(0, w.base[0], g), bf), &stats);
    EXPECT_TRUE(s.ok()) << s.ToString();
  });
}

TEST(BadInputSpecificTest, SyncDuplicate) {
  RuleConfig rule = Rule(RuleKind::kSync, 0.9f);
  Warm w = MakeWarm(rule, 0);
  ASSERT_TRUE(w.engine);
  UpdateEngine* e = w.engine.get();
  const Vec g(kP, 0.5f);
  ApplyStats stats;
  ASSERT_TRUE(e->Push(Request(0, w.base[0], g), &stats).ok());
  EXPECT_EQ(stats.outcome, Outcome::kAccumulated);
  ExpectRejectedUnchanged(e, Request(0, w.base[0], g), RejectReason::kDuplicate);
  // The step still needs exactly the other two workers.
  ASSERT_TRUE(e->Push(Request(1, w.base[1], g), &stats).ok());
  EXPECT_EQ(stats.outcome, Outcome::kAccumulated);
  ASSERT_TRUE(e->Push(Request(2, w.base[2], g), &stats).ok());
  EXPECT_EQ(stats.outcome, Outcome::kApplied);
  EXPECT_EQ(stats.aggregated, 3u);
}

// A run with bad pushes mixed in ends exactly where the good pushes alone
// end: rejections touch nothing, not even a worker's bookkeeping.
class MixedInputTest : public ::testing::TestWithParam<BadInputCase> {};

TEST_P(MixedInputTest, BadPushesChangeNothing) {
  const RuleConfig& rule = GetParam().rule;
  const bool echo = rule.NeedsWorkerCopy() && rule.gap_source == GapSource::kEcho;
  auto clean = MakeEngine(rule);
  auto mixed = MakeEngine(rule);
  ASSERT_TRUE(clean && mixed);
  for (WorkerId id = 0; id < 4; ++id) {
    ASSERT_TRUE(clean->Join(id).ok());
    ASSERT_TRUE(mixed->Join(id).ok());
  }
  std::mt19937 rng(21);
  std::vector<uint64_t> base(4, 0);
  std::vector<Vec> point(4);
  std::vector<bool> pulled(4, false);
  int bad_pushes = 0, good_pushes = 0;
  for (int event = 0; event < 150; ++event) {
    const WorkerId id = rng() % 4;
    if (!pulled[id] || rng() % 3 == 0) {
      uint64_t v1 = 0, v2 = 0;
      point[id] = Pull(clean.get(), id, &v1);
      const Vec p2 = Pull(mixed.get(), id, &v2);
      ASSERT_EQ(v1, v2);
      ASSERT_EQ(std::memcmp(point[id].data(), p2.data(), kP * sizeof(float)), 0);
      base[id] = v1;
      pulled[id] = true;
      continue;
    }
    // Some bad pushes to the mixed engine first.
    const int kind = static_cast<int>(rng() % 7);
    Vec bad_g = RandomVec(&rng, kP, 1.0f);
    PushRequest bad = Request(id, base[id], bad_g);
    if (echo) bad = WithEcho(bad, point[id]);
    switch (kind) {
      case 0: bad.worker = 1000; break;
      case 1: bad.gradient = GradientView(bad_g.data(), kP - 2); break;
      case 2: bad_g[rng() % kP] = std::numeric_limits<float>::quiet_NaN(); break;
      case 3: bad.base_version = mixed->version() + 1; break;
      case 4: bad_g[rng() % kP] = -std::numeric_limits<float>::infinity(); break;
      case 5:
        if (echo) {
          bad.echo_size = kP - 1;
        } else {
          bad.gradient = GradientView();
        }
        break;
      default: bad.gradient = GradientView(bad_g.data(), 0); break;
    }
    ApplyStats stats;
    ASSERT_FALSE(mixed->Push(bad, &stats).ok()) << "bad push kind " << kind;
    ++bad_pushes;
    // Then the same good push to both.
    const Vec g = RandomVec(&rng, kP, 1.0f);
    PushRequest good = Request(id, base[id], g);
    if (echo) good = WithEcho(good, point[id]);
    ApplyStats s1, s2;
    Status r1 = clean->Push(good, &s1);
    Status r2 = mixed->Push(good, &s2);
    ASSERT_EQ(r1.code(), r2.code()) << r1.ToString() << " vs " << r2.ToString();
    EXPECT_EQ(s1.outcome, s2.outcome);
    EXPECT_EQ(s1.staleness, s2.staleness);
    if (r1.ok()) ++good_pushes;
  }
  EXPECT_GT(bad_pushes, 40);
  EXPECT_GT(good_pushes, 40);
  EXPECT_EQ(clean->version(), mixed->version());
  EXPECT_GT(clean->version(), 5u);
  const Image a = Capture(*clean), b = Capture(*mixed);
  EXPECT_EQ(std::memcmp(a.params.data(), b.params.data(), a.params.size()), 0);
  EXPECT_EQ(a.buffers, b.buffers);
  EXPECT_EQ(a.scalars, b.scalars);
  EXPECT_EQ(a.applied, b.applied);
  EXPECT_EQ(a.discarded_late, b.discarded_late);
  uint64_t total_rejected = 0;
  for (size_t r = 0; r < kNumReasons; ++r) total_rejected += b.rejected[r] - a.rejected[r];
  EXPECT_EQ(total_rejected, static_cast<uint64_t>(bad_pushes));
}

INSTANTIATE_TEST_SUITE_P(SomeRules, MixedInputTest, ::testing::ValuesIn(BadInputCases()),
                         [](const ::testing::TestParamInfo<BadInputCase>& info) {
                           return info.param.name;
                         });

// ------------------------------------------------------ DANA membership

// DANA-Zero's Leave takes v_i out of S: the next reply is
// θ − ηγ·(sum of the remaining momenta).
TEST(DanaZeroMembershipTest, LeaveRemovesTheWorkersMomentum) {
  for (float wd : {0.0f, 1e-3f}) {
    SCOPED_TRACE(wd);
    ScheduleConfig schedule;
    schedule.learning_rate = 0.05;
    auto e = MakeEngine(Rule(RuleKind::kDanaZero, 0.9f, wd), schedule);
    ASSERT_TRUE(e);
    for (WorkerId id = 0; id < 3; ++id) ASSERT_TRUE(e->Join(id).ok());
    const size_t memory_with_three = e->store().MemoryBytes();
    std::mt19937 rng(17);
    // Each worker pushes once: v_i = g_i + λθ (its momentum started at 0).
    std::vector<Vec> v(3, Vec(kP));
    for (WorkerId id = 0; id < 3; ++id) {
      uint64_t base = 0;
      Pull(e.get(), id, &base);
      const Vec theta = Params(*e);
      const Vec g = RandomVec(&rng, kP, 1.0f);
      for (size_t j = 0; j < kP; ++j) v[id][j] = g[j] + wd * theta[j];
      ApplyStats stats;
      ASSERT_TRUE(e->Push(Request(id, base, g), &stats).ok());
      // θ moved by −η·v_i.
      const Vec after = Params(*e);
      for (size_t j = 0; j < kP; ++j) {
        ASSERT_NEAR(after[j], theta[j] - 0.05f * v[id][j], 1e-6f) << j;
      }
    }
    const float c = 0.05f * 0.9f;
    auto expect_reply = [&](WorkerId asker, const std::vector<WorkerId>& members) {
      uint64_t version = 0;
      const Vec reply = Pull(e.get(), asker, &version);
      const Vec theta = Params(*e);
      for (size_t j = 0; j < kP; ++j) {
        float s = 0.0f;
        for (WorkerId m : members) s += v[m][j];
        ASSERT_NEAR(reply[j], theta[j] - c * s, 2e-6f) << "element " << j;
      }
    };
    expect_reply(1, {0, 1, 2});
    ASSERT_TRUE(e->Leave(0).ok());
    EXPECT_EQ(e->store().MemoryBytes(), memory_with_three - 4 * kP);
    expect_reply(1, {1, 2});
    ASSERT_TRUE(e->Leave(2).ok());
    expect_reply(1, {1});
    // A rejoining worker starts from zero momentum: S is unchanged.
    ASSERT_TRUE(e->Join(0).ok());
    expect_reply(0, {1});
    // The model itself never moved on leave or join.
    EXPECT_EQ(e->version(), 3u);
  }
}

TEST(DanaZeroMembershipTest, GapAwareDanaLeaveAlsoRemovesMomentum) {
  ScheduleConfig schedule;
  schedule.learning_rate = 0.05;
  RuleConfig rule = Rule(RuleKind::kGapAwareDana, 0.9f);
  auto e = MakeEngine(rule, schedule);
  ASSERT_TRUE(e);
  for (WorkerId id = 0; id < 2; ++id) ASSERT_TRUE(e->Join(id).ok());
  // Worker 0's first push is the rule's first update: G = 1, so v_0 = g.
  uint64_t base = 0;
  Pull(e.get(), 0, &base);
  std::mt19937 rng(8);
  const Vec g = RandomVec(&rng, kP, 1.0f);
  ApplyStats stats;
  ASSERT_TRUE(e->Push(Request(0, base, g), &stats).ok());
  EXPECT_EQ(stats.gap.gap_max, 1.0);
  uint64_t version = 0;
  Vec reply = Pull(e.get(), 1, &version);
  Vec theta = Params(*e);
  for (size_t j = 0; j < kP; ++j) ASSERT_NEAR(reply[j], theta[j] - 0.045f * g[j], 2e-6f);
  const size_t memory = e->store().MemoryBytes();
  ASSERT_TRUE(e->Leave(0).ok());
  EXPECT_LT(e->store().MemoryBytes(), memory);
  reply = Pull(e.get(), 1, &version);
  theta = Params(*e);
  for (size_t j = 0; j < kP; ++j) ASSERT_NEAR(reply[j], theta[j], 1e-6f) << j;
}

}  // namespace
}  // namespace gaptrain
