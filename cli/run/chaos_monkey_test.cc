// Tests the --chaos spec parser (valid specs, the optional "s", repeated
// master kills, an error naming the key for each bad key or value, empty
// or disabled specs) and ChaosMonkey::Due replayed with explicit times: a
// clock that starts at the first candidate (the first trainer's
// registration), one kill per interval alternating SIGTERM/SIGKILL
// (SIGTERM first), each restart exactly restart_after later, no kill
// without candidates (it happens at the next call that has some), master
// kills and restarts, a schedule fixed by the seed, counters that match
// the actions, and an event log with every action's time; on the progress
// clock, kills at each multiple of the step whatever the seconds, one per
// jump, and master kills at their percentages.

#include "cli/run/chaos_monkey.h"

#include <signal.h>

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace gaptrain {
namespace {

using Kind = ChaosAction::Kind;

// ---- ParseChaosOptions ----

// A spec on the seconds clock, as every key of it parsed.
void ExpectSecondsSpec(const ChaosOptions& o, double every, double restart,
                       const std::vector<double>& master_at, uint64_t seed) {
  EXPECT_EQ(o.kill_every_seconds, every);
  EXPECT_EQ(o.restart_after_seconds, restart);
  EXPECT_EQ(o.kill_master_at_seconds, master_at);
  EXPECT_EQ(o.seed, seed);
  EXPECT_TRUE(o.enabled());
}

TEST(ParseChaosOptionsTest, FullSpec) {
  ChaosOptions o;
  ASSERT_TRUE(ParseChaosOptions("every=20s,restart=5s,master=45s,seed=3", &o).ok());
  ExpectSecondsSpec(o, 20, 5, {45}, 3);
}

TEST(ParseChaosOptionsTest, ShardPicksTheMasterShardTheMasterKillsHit) {
  ChaosOptions o;
  EXPECT_EQ(o.master_shard, 0u);
  ASSERT_TRUE(ParseChaosOptions("master=50%,shard=1", &o).ok());
  EXPECT_EQ(o.master_shard, 1u);
  for (const char* bad : {"master=50%,shard=-1", "master=50%,shard=64", "master=50%,shard="}) {
    const Status s = ParseChaosOptions(bad, &o);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("--chaos: shard: must be a master shard, 0 to 63"),
              std::string::npos)
        << s.ToString();
  }
}

TEST(ParseChaosOptionsTest, TheSecondsSuffixIsOptional) {
  ChaosOptions with_s, without_s;
  ASSERT_TRUE(ParseChaosOptions("every=20s,restart=2.5s", &with_s).ok());
  ASSERT_TRUE(ParseChaosOptions("every=20,restart=2.5", &without_s).ok());
  EXPECT_EQ(with_s.kill_every_seconds, 20);
  EXPECT_EQ(without_s.kill_every_seconds, 20);
  EXPECT_EQ(with_s.restart_after_seconds, 2.5);
  EXPECT_EQ(without_s.restart_after_seconds, 2.5);
}

TEST(ParseChaosOptionsTest, DefaultsForKeysNotGiven) {
  ChaosOptions o;
  ASSERT_TRUE(ParseChaosOptions("master=30", &o).ok());
  ExpectSecondsSpec(o, 0, 5, {30}, 1);

  ASSERT_TRUE(ParseChaosOptions("every=7", &o).ok());
  EXPECT_EQ(o.kill_every_seconds, 7);
  EXPECT_TRUE(o.kill_master_at_seconds.empty());
  EXPECT_TRUE(o.enabled());
}

TEST(ParseChaosOptionsTest, MasterMayBeKilledMoreThanOnce) {
  ChaosOptions o;
  ASSERT_TRUE(ParseChaosOptions("every=4,master=30s,master=12,master=0", &o).ok());
  EXPECT_EQ(o.kill_master_at_seconds, (std::vector<double>{12, 30})) << "sorted, 0 dropped";
}

TEST(ParseChaosOptionsTest, PercentagesAreOnTheProgressClock) {
  ChaosOptions o;
  ASSERT_TRUE(ParseChaosOptions("every=15%,restart=1,master=70%,master=35%,master=20s", &o).ok());
  EXPECT_DOUBLE_EQ(o.kill_every_progress, 0.15);
  EXPECT_EQ(o.kill_every_seconds, 0);
  EXPECT_EQ(o.kill_master_at_progress, (std::vector<double>{0.35, 0.70})) << "sorted";
  EXPECT_EQ(o.kill_master_at_seconds, std::vector<double>{20});
  EXPECT_TRUE(o.enabled());

  ASSERT_TRUE(ParseChaosOptions("master=50%", &o).ok());
  EXPECT_TRUE(o.enabled());
  EXPECT_EQ(o.kill_every_progress, 0);
  // The last `every` wins, on its own clock.
  ASSERT_TRUE(ParseChaosOptions("every=10%,every=3s", &o).ok());
  EXPECT_EQ(o.kill_every_progress, 0);
  EXPECT_EQ(o.kill_every_seconds, 3);
}

TEST(ParseChaosOptionsTest, LargestSeed) {
  ChaosOptions o;
  ASSERT_TRUE(ParseChaosOptions("every=1,seed=18446744073709551615", &o).ok());
  EXPECT_EQ(o.seed, 18446744073709551615u);
}

TEST(ParseChaosOptionsTest, BadValuesNameTheirKey) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"every=abc", "every"},         {"every=-1", "every"},
      {"every=", "every"},            {"every=s", "every"},
      {"every=20ss", "every"},        {"every=100000", "every"},
      {"every=inf", "every"},         {"every=nan", "every"},
      {"every=5,restart=x", "restart"}, {"every=5,restart=-2s", "restart"},
      {"master=soon", "master"},      {"master=1e9", "master"},
      {"every=5,seed=abc", "seed"},   {"every=5,seed=-3", "seed"},
      {"every=5,seed= -3", "seed"},   {"every=5,seed=", "seed"},
      {"every=5,seed=1.5", "seed"},   {"every=5,seed=18446744073709551616", "seed"},
      {"every=%", "every"},           {"every=0%", "every"},
      {"every=100%", "every"},        {"every=-5%", "every"},
      {"every=5s%", "every"},         {"master=120%", "master"},
      {"master=0%", "master"},        {"master=nan%", "master"},
  };
  for (const auto& [spec, key] : cases) {
    ChaosOptions o;
    o.seed = 99;
    const Status s = ParseChaosOptions(spec, &o);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << spec;
    EXPECT_NE(s.message().find(key + ":"), std::string::npos) << spec << " -> " << s.message();
    EXPECT_EQ(o.seed, 99u) << spec << ": options changed on error";
  }
}

TEST(ParseChaosOptionsTest, UnknownKeyIsNamed) {
  ChaosOptions o;
  const Status s = ParseChaosOptions("every=5,bogus=1", &o);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("'bogus'"), std::string::npos) << s.message();
}

TEST(ParseChaosOptionsTest, PairWithoutEqualsIsRejected) {
  ChaosOptions o;
  const Status s = ParseChaosOptions("every", &o);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("key=value"), std::string::npos) << s.message();
}

TEST(ParseChaosOptionsTest, EmptyOrDisabledSpecIsRejected) {
  for (const std::string spec : {"", "restart=5", "seed=3", "every=0", "every=0s,master=0",
                                 "restart=1,seed=2"}) {
    ChaosOptions o;
    const Status s = ParseChaosOptions(spec, &o);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << "'" << spec << "'";
    EXPECT_FALSE(o.enabled()) << "'" << spec << "'";
  }
}

// ---- ChaosMonkey::Due ----

struct Event {
  double time;
  ChaosAction action;
};

// Replays `monkey` from 0 to `end` seconds in steps of `step` with
// `trainers` trainers; a trainer is killable unless the monkey killed it
// and has not restarted it yet. Also checks that only killable trainers
// are killed and only killed ones restarted.
std::vector<Event> Replay(ChaosMonkey* monkey, size_t trainers, double end, double step = 0.5) {
  std::vector<bool> down(trainers, false);
  std::vector<Event> events;
  for (int i = 0; i * step <= end; ++i) {
    const double now = i * step;
    std::vector<size_t> killable;
    for (size_t t = 0; t < trainers; ++t) {
      if (!down[t]) killable.push_back(t);
    }
    for (const ChaosAction& a : monkey->Due(now, 0, killable)) {
      events.push_back({now, a});
      if (a.kind == Kind::kKillTrainer) {
        EXPECT_LT(a.trainer, trainers);
        EXPECT_FALSE(down[a.trainer]) << "killed trainer " << a.trainer << " twice at " << now;
        down[a.trainer] = true;
      } else if (a.kind == Kind::kRestartTrainer) {
        EXPECT_TRUE(down[a.trainer]) << "restarted trainer " << a.trainer << " that was up";
        down[a.trainer] = false;
      }
    }
  }
  return events;
}

std::vector<Event> OfKind(const std::vector<Event>& events, Kind kind) {
  std::vector<Event> out;
  for (const Event& e : events) {
    if (e.action.kind == kind) out.push_back(e);
  }
  return out;
}

ChaosOptions Options(double every, double restart, double master, uint64_t seed) {
  ChaosOptions o;
  o.kill_every_seconds = every;
  o.restart_after_seconds = restart;
  if (master > 0) o.kill_master_at_seconds = {master};
  o.seed = seed;
  return o;
}

TEST(ChaosMonkeyTest, KillsEveryIntervalAlternatingSigtermAndSigkill) {
  ChaosMonkey monkey(Options(10, 3, 0, 7));
  const std::vector<Event> events = Replay(&monkey, 4, 100);
  const std::vector<Event> kills = OfKind(events, Kind::kKillTrainer);
  ASSERT_EQ(kills.size(), 10u);
  for (size_t i = 0; i < kills.size(); ++i) {
    EXPECT_EQ(kills[i].time, 10.0 * (i + 1)) << "kill " << i;
    EXPECT_EQ(kills[i].action.signal, i % 2 == 0 ? SIGTERM : SIGKILL) << "kill " << i;
  }
  EXPECT_EQ(monkey.trainer_sigterms(), 5u);
  EXPECT_EQ(monkey.trainer_sigkills(), 5u);
  EXPECT_EQ(monkey.master_kills(), 0u);
  EXPECT_TRUE(OfKind(events, Kind::kKillMaster).empty());
  EXPECT_TRUE(OfKind(events, Kind::kRestartMaster).empty());
}

TEST(ChaosMonkeyTest, NothingBeforeTheFirstInterval) {
  ChaosMonkey monkey(Options(10, 3, 0, 1));
  EXPECT_TRUE(monkey.Due(0, 0, {0, 1}).empty());
  EXPECT_TRUE(monkey.Due(9.99, 0, {0, 1}).empty());
  const std::vector<ChaosAction> at10 = monkey.Due(10, 0, {0, 1});
  ASSERT_EQ(at10.size(), 1u);
  EXPECT_EQ(at10[0].kind, Kind::kKillTrainer);
  EXPECT_EQ(at10[0].signal, SIGTERM);
}

TEST(ChaosMonkeyTest, RestartComesExactlyRestartAfterLater) {
  ChaosMonkey monkey(Options(10, 3, 0, 1));
  EXPECT_TRUE(monkey.Due(0, 0, {0, 1, 2}).empty());
  const std::vector<ChaosAction> kill = monkey.Due(10, 0, {0, 1, 2});
  ASSERT_EQ(kill.size(), 1u);
  ASSERT_EQ(kill[0].kind, Kind::kKillTrainer);
  const size_t victim = kill[0].trainer;
  std::vector<size_t> others;
  for (size_t t : {0, 1, 2}) {
    if (t != victim) others.push_back(t);
  }
  EXPECT_TRUE(monkey.Due(12.999, 0, others).empty());
  const std::vector<ChaosAction> restart = monkey.Due(13, 0, others);
  ASSERT_EQ(restart.size(), 1u);
  EXPECT_EQ(restart[0].kind, Kind::kRestartTrainer);
  EXPECT_EQ(restart[0].trainer, victim);
  // Restarted once only.
  EXPECT_TRUE(monkey.Due(15, 0, {0, 1, 2}).empty());
}

TEST(ChaosMonkeyTest, EveryRestartInAReplayIsRestartAfterItsKill) {
  ChaosMonkey monkey(Options(10, 3, 0, 5));
  const std::vector<Event> events = Replay(&monkey, 3, 100);
  const std::vector<Event> kills = OfKind(events, Kind::kKillTrainer);
  const std::vector<Event> restarts = OfKind(events, Kind::kRestartTrainer);
  // Kills at 10..100; the restart of the one at 100 is due after the end.
  ASSERT_EQ(kills.size(), 10u);
  ASSERT_EQ(restarts.size(), 9u);
  for (size_t i = 0; i < restarts.size(); ++i) {
    EXPECT_EQ(restarts[i].time, kills[i].time + 3) << "restart " << i;
    EXPECT_EQ(restarts[i].action.trainer, kills[i].action.trainer) << "restart " << i;
  }
}

TEST(ChaosMonkeyTest, KillWaitsForACandidate) {
  ChaosMonkey monkey(Options(10, 3, 0, 1));
  EXPECT_TRUE(monkey.Due(0, 0, {0}).empty());
  EXPECT_TRUE(monkey.Due(10, 0, {}).empty());
  EXPECT_TRUE(monkey.Due(11, 0, {}).empty());
  const std::vector<ChaosAction> late = monkey.Due(12.5, 0, {2});
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].kind, Kind::kKillTrainer);
  EXPECT_EQ(late[0].trainer, 2u);
  EXPECT_EQ(late[0].signal, SIGTERM) << "a kill that waited is still the first";
  EXPECT_EQ(monkey.trainer_sigterms(), 1u);
  EXPECT_EQ(monkey.trainer_sigkills(), 0u);
  // The next interval counts from the kill that happened.
  const std::vector<ChaosAction> restart = monkey.Due(15.5, 0, {0, 1});
  ASSERT_EQ(restart.size(), 1u);
  EXPECT_EQ(restart[0].kind, Kind::kRestartTrainer);
  EXPECT_EQ(restart[0].trainer, 2u);
  EXPECT_TRUE(monkey.Due(22.4, 0, {0, 1, 2}).empty());
  const std::vector<ChaosAction> next = monkey.Due(22.5, 0, {0, 1, 2});
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].kind, Kind::kKillTrainer);
  EXPECT_EQ(next[0].signal, SIGKILL);
}

TEST(ChaosMonkeyTest, PicksOnlyFromTheCandidates) {
  ChaosMonkey monkey(Options(1, 100, 0, 11));
  EXPECT_TRUE(monkey.Due(0, 0, {5, 9}).empty());
  for (int t = 1; t <= 50; ++t) {
    const std::vector<ChaosAction> actions = monkey.Due(t, 0, {5, 9});
    ASSERT_EQ(actions.size(), 1u) << "t=" << t;
    EXPECT_TRUE(actions[0].trainer == 5 || actions[0].trainer == 9) << actions[0].trainer;
  }
}

TEST(ChaosMonkeyTest, MasterIsKilledOnceAndRestartedOnce) {
  ChaosMonkey monkey(Options(0, 3, 25, 1));
  const std::vector<Event> events = Replay(&monkey, 2, 100);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].time, 25);
  EXPECT_EQ(events[0].action.kind, Kind::kKillMaster);
  EXPECT_EQ(events[0].action.signal, SIGKILL);
  EXPECT_EQ(events[1].time, 28);
  EXPECT_EQ(events[1].action.kind, Kind::kRestartMaster);
  EXPECT_EQ(monkey.master_kills(), 1u);
  EXPECT_EQ(monkey.trainer_sigterms() + monkey.trainer_sigkills(), 0u);
}

// The job: trainers registered seconds apart, and nothing was
// killed before the last one had. The clock starts with the first one.
TEST(ChaosMonkeyTest, ClockStartsAtTheFirstTrainersRegistration) {
  ChaosMonkey monkey(Options(8, 3, 25, 1));
  EXPECT_TRUE(monkey.Due(0, 0, {}).empty());
  EXPECT_TRUE(monkey.Due(30, 0, {}).empty()) << "no trainer yet: the clock has not started";
  EXPECT_LT(monkey.started_at(), 0);
  EXPECT_TRUE(monkey.Due(31, 0, {4}).empty());
  EXPECT_EQ(monkey.started_at(), 31);
  // One trainer registered is enough: it is killed 8 s later.
  EXPECT_TRUE(monkey.Due(38.9, 0, {4}).empty());
  const std::vector<ChaosAction> kill = monkey.Due(39, 0, {4});
  ASSERT_EQ(kill.size(), 1u);
  EXPECT_EQ(kill[0].kind, Kind::kKillTrainer);
  EXPECT_EQ(kill[0].trainer, 4u);
  // The master 25 s after the first registration, with no candidate.
  const std::vector<ChaosAction> back = monkey.Due(42, 0, {});
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].kind, Kind::kRestartTrainer);
  EXPECT_TRUE(monkey.Due(55.9, 0, {}).empty());
  const std::vector<ChaosAction> master = monkey.Due(56, 0, {});
  ASSERT_EQ(master.size(), 1u);
  EXPECT_EQ(master[0].kind, Kind::kKillMaster);
}

TEST(ChaosMonkeyTest, MasterKillNeedsNoTrainerCandidatesOnceStarted) {
  ChaosMonkey monkey(Options(0, 2, 5, 1));
  EXPECT_TRUE(monkey.Due(1, 0, {}).empty());
  EXPECT_TRUE(monkey.Due(3, 0, {0}).empty());  // the clock starts: the kill is due at 8
  EXPECT_TRUE(monkey.Due(7.9, 0, {}).empty());
  const std::vector<ChaosAction> kill = monkey.Due(8, 0, {});
  ASSERT_EQ(kill.size(), 1u);
  EXPECT_EQ(kill[0].kind, Kind::kKillMaster);
  EXPECT_TRUE(monkey.Due(9.9, 0, {}).empty());
  const std::vector<ChaosAction> restart = monkey.Due(10, 0, {});
  ASSERT_EQ(restart.size(), 1u);
  EXPECT_EQ(restart[0].kind, Kind::kRestartMaster);
  EXPECT_TRUE(monkey.Due(1000, 0, {}).empty());
}

TEST(ChaosMonkeyTest, MasterKilledAtEachTimeGiven) {
  ChaosOptions o = Options(0, 3, 0, 1);
  o.kill_master_at_seconds = {10, 20};
  ChaosMonkey monkey(o);
  const std::vector<Event> events = Replay(&monkey, 2, 60);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].time, 10);
  EXPECT_EQ(events[0].action.kind, Kind::kKillMaster);
  EXPECT_EQ(events[1].time, 13);
  EXPECT_EQ(events[1].action.kind, Kind::kRestartMaster);
  EXPECT_EQ(events[2].time, 20);
  EXPECT_EQ(events[2].action.kind, Kind::kKillMaster);
  EXPECT_EQ(events[3].time, 23);
  EXPECT_EQ(events[3].action.kind, Kind::kRestartMaster);
  EXPECT_EQ(monkey.master_kills(), 2u);
}

// A second kill due while the master is down waits for it to serve again.
TEST(ChaosMonkeyTest, MasterKillDueWhileItIsDownWaitsForItsRestart) {
  ChaosOptions o = Options(0, 5, 0, 1);
  o.kill_master_at_seconds = {10, 12};
  ChaosMonkey monkey(o);
  const std::vector<Event> events = Replay(&monkey, 1, 30);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[1].time, 15);
  EXPECT_EQ(events[1].action.kind, Kind::kRestartMaster);
  EXPECT_EQ(events[2].time, 15.5) << "killed at the next call after its restart";
  EXPECT_EQ(events[2].action.kind, Kind::kKillMaster);
  EXPECT_EQ(events[3].time, 20.5);
}

TEST(ChaosMonkeyTest, EventsLogEveryActionWithItsTime) {
  ChaosMonkey monkey(Options(4, 2, 9, 3));
  EXPECT_TRUE(monkey.Due(1, 0, {}).empty());
  std::vector<Event> returned;
  for (int i = 4; i <= 40; ++i) {  // the clock starts at 2, the first call with a candidate
    const double now = i / 2.0;
    for (const ChaosAction& a : monkey.Due(now, 0, {0, 1, 2})) returned.push_back({now, a});
  }
  const std::vector<ChaosEvent>& log = monkey.events();
  ASSERT_EQ(log.size(), returned.size());
  ASSERT_GE(log.size(), 6u);
  for (size_t i = 0; i < log.size(); ++i) {
    EXPECT_EQ(log[i].at, returned[i].time) << i;
    EXPECT_EQ(log[i].after_start, returned[i].time - 2) << i;
    EXPECT_EQ(log[i].action.kind, returned[i].action.kind) << i;
    EXPECT_EQ(log[i].action.trainer, returned[i].action.trainer) << i;
  }
  EXPECT_EQ(log[0].at, 6);  // the first kill: 4 s after the clock started
  EXPECT_EQ(ChaosFaultName(log[0].action), "SIGTERM");
  EXPECT_EQ(ChaosTargetName(log[0].action), "trainer-" + std::to_string(log[0].action.trainer));
  const ChaosAction master_kill{Kind::kKillMaster, 0, SIGKILL};
  EXPECT_EQ(ChaosFaultName(master_kill), "SIGKILL");
  EXPECT_EQ(ChaosTargetName(master_kill), "master");
  EXPECT_EQ(ChaosFaultName({Kind::kRestartTrainer, 2, 0}), "restart");
}

TEST(ChaosMonkeyTest, TrainerAndMasterFaultsTogetherMatchTheCounters) {
  ChaosMonkey monkey(Options(10, 4, 35, 3));
  const std::vector<Event> events = Replay(&monkey, 4, 60);
  const std::vector<Event> kills = OfKind(events, Kind::kKillTrainer);
  size_t sigterms = 0, sigkills = 0;
  for (const Event& e : kills) (e.action.signal == SIGTERM ? sigterms : sigkills)++;
  EXPECT_EQ(kills.size(), 6u);
  EXPECT_EQ(monkey.trainer_sigterms(), sigterms);
  EXPECT_EQ(monkey.trainer_sigkills(), sigkills);
  EXPECT_EQ(sigterms, 3u);
  EXPECT_EQ(sigkills, 3u);
  const std::vector<Event> master_kills = OfKind(events, Kind::kKillMaster);
  const std::vector<Event> master_restarts = OfKind(events, Kind::kRestartMaster);
  ASSERT_EQ(master_kills.size(), 1u);
  ASSERT_EQ(master_restarts.size(), 1u);
  EXPECT_EQ(monkey.master_kills(), 1u);
  EXPECT_EQ(master_kills[0].time, 35);
  EXPECT_EQ(master_restarts[0].time, 39);
  // Each kill's restart, but the last one's (due at 64, after the replay).
  EXPECT_EQ(OfKind(events, Kind::kRestartTrainer).size(), 5u);
}

std::vector<size_t> Victims(uint64_t seed) {
  ChaosMonkey monkey(Options(10, 3, 0, seed));
  std::vector<size_t> victims;
  for (const Event& e : OfKind(Replay(&monkey, 8, 300), Kind::kKillTrainer)) {
    victims.push_back(e.action.trainer);
  }
  return victims;
}

TEST(ChaosMonkeyTest, SameSeedSameSchedule) {
  ChaosMonkey a(Options(10, 3, 45, 42)), b(Options(10, 3, 45, 42));
  const std::vector<Event> ea = Replay(&a, 8, 300), eb = Replay(&b, 8, 300);
  ASSERT_EQ(ea.size(), eb.size());
  ASSERT_GT(ea.size(), 40u);
  for (size_t i = 0; i < ea.size(); ++i) {
    EXPECT_EQ(ea[i].time, eb[i].time) << i;
    EXPECT_EQ(ea[i].action.kind, eb[i].action.kind) << i;
    EXPECT_EQ(ea[i].action.trainer, eb[i].action.trainer) << i;
    EXPECT_EQ(ea[i].action.signal, eb[i].action.signal) << i;
  }
}

TEST(ChaosMonkeyTest, DifferentSeedsPickDifferentTrainers) {
  const std::vector<size_t> base = Victims(1);
  ASSERT_EQ(base.size(), 30u);
  // The victims are not all the same trainer...
  std::map<size_t, int> seen;
  for (size_t v : base) seen[v]++;
  EXPECT_GT(seen.size(), 1u);
  // ...and the seed changes them (30 picks among 8: equal only by chance).
  int differing = 0;
  for (uint64_t seed = 2; seed <= 5; ++seed) differing += Victims(seed) != base;
  EXPECT_GE(differing, 3);
}

}  // namespace
}  // namespace gaptrain

namespace gaptrain {
namespace {

// ---- the progress clock ----

ChaosOptions ProgressOptions(double every, std::vector<double> master_at) {
  ChaosOptions o;
  o.kill_every_progress = every;
  o.kill_master_at_progress = std::move(master_at);
  o.restart_after_seconds = 1;
  o.seed = 3;
  return o;
}

// A trainer is killed each time progress passes a multiple of `every`,
// however many seconds that takes: a fast machine sees as many faults as
// a slow one.
TEST(ChaosMonkeyProgressTest, KillsAtEachMultipleOfTheStepWhateverTheTime) {
  for (const double seconds_per_percent : {0.01, 0.1, 2.0}) {
    ChaosMonkey monkey(ProgressOptions(0.2, {}));
    std::vector<double> kill_progress;
    std::vector<int> signals;
    std::vector<bool> down(4, false);
    for (int percent = 0; percent <= 90; ++percent) {
      std::vector<size_t> killable;
      for (size_t t = 0; t < 4; ++t) {
        if (!down[t]) killable.push_back(t);
      }
      for (const ChaosAction& a :
           monkey.Due(percent * seconds_per_percent, percent / 100.0, killable)) {
        if (a.kind == Kind::kKillTrainer) {
          kill_progress.push_back(percent / 100.0);
          signals.push_back(a.signal);
          down[a.trainer] = true;
        } else if (a.kind == Kind::kRestartTrainer) {
          down[a.trainer] = false;
        }
      }
    }
    ASSERT_EQ(kill_progress.size(), 4u) << seconds_per_percent << " s per percent";
    for (size_t i = 0; i < kill_progress.size(); ++i) {
      EXPECT_DOUBLE_EQ(kill_progress[i], 0.2 * (i + 1)) << "kill " << i;
      EXPECT_EQ(signals[i], i % 2 == 0 ? SIGTERM : SIGKILL) << "kill " << i;
    }
  }
}

TEST(ChaosMonkeyProgressTest, AJumpOverSeveralStepsKillsOnce) {
  ChaosMonkey monkey(ProgressOptions(0.1, {}));
  EXPECT_TRUE(monkey.Due(0, 0.05, {0, 1}).empty());
  EXPECT_EQ(monkey.Due(1, 0.37, {0, 1}).size(), 1u);
  EXPECT_TRUE(monkey.Due(1.5, 0.39, {0, 1}).empty()) << "the next kill is at 40%";
  bool killed = false;
  for (const ChaosAction& a : monkey.Due(1.6, 0.40, {0, 1})) {
    killed |= a.kind == Kind::kKillTrainer;
  }
  EXPECT_TRUE(killed);
}

TEST(ChaosMonkeyProgressTest, AClockStartedLateCountsFromTheProgressThen) {
  ChaosMonkey monkey(ProgressOptions(0.25, {}));
  EXPECT_TRUE(monkey.Due(0, 0.3, {}).empty());
  EXPECT_TRUE(monkey.Due(1, 0.3, {2}).empty()) << "started at 30%: the first kill is at 50%";
  EXPECT_TRUE(monkey.Due(2, 0.49, {2}).empty());
  const std::vector<ChaosAction> kill = monkey.Due(3, 0.5, {2});
  ASSERT_EQ(kill.size(), 1u);
  EXPECT_EQ(kill[0].trainer, 2u);
}

TEST(ChaosMonkeyProgressTest, MasterKilledAtEachPercentageAndRestartedInSeconds) {
  ChaosMonkey monkey(ProgressOptions(0, {0.35, 0.4}));
  EXPECT_TRUE(monkey.Due(0, 0, {0}).empty());
  EXPECT_TRUE(monkey.Due(5, 0.34, {0}).empty());
  const std::vector<ChaosAction> kill = monkey.Due(6, 0.41, {0});
  ASSERT_EQ(kill.size(), 1u) << "one kill; the second waits for the restart";
  EXPECT_EQ(kill[0].kind, Kind::kKillMaster);
  // Progress stands still while the master is down; its restart is timed.
  EXPECT_TRUE(monkey.Due(6.9, 0.41, {0}).empty());
  const std::vector<ChaosAction> restart = monkey.Due(7, 0.41, {0});
  ASSERT_EQ(restart.size(), 1u);
  EXPECT_EQ(restart[0].kind, Kind::kRestartMaster);
  const std::vector<ChaosAction> second = monkey.Due(7.5, 0.41, {0});
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].kind, Kind::kKillMaster);
  EXPECT_EQ(monkey.master_kills(), 2u);
  EXPECT_EQ(monkey.trainer_sigterms() + monkey.trainer_sigkills(), 0u);
}

}  // namespace
}  // namespace gaptrain
