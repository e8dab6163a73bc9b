// Tests LastLevelCacheFromSysfs on cache directories laid out as sysfs
// lays them out: the highest level wins, instruction caches and entries
// that do not parse are skipped, and a directory without caches gives 0;
// and CacheFit's three bands.

#include "bench/cache_size.h"

#include <sys/stat.h>

#include <string>

#include <gtest/gtest.h>

#include "services/testing/test_files.h"

namespace gaptrain {
namespace {

// <cpu_dir>/cache/index<n>/{level,type,size}, each with a newline as sysfs
// writes them.
void AddCache(const std::string& cpu_dir, int index, const std::string& level,
              const std::string& type, const std::string& size) {
  const std::string dir = cpu_dir + "/cache/index" + std::to_string(index);
  mkdir((cpu_dir + "/cache").c_str(), 0755);
  mkdir(dir.c_str(), 0755);
  WriteRaw(dir + "/level", level + "\n");
  WriteRaw(dir + "/type", type + "\n");
  WriteRaw(dir + "/size", size + "\n");
}

TEST(LastLevelCacheFromSysfsTest, TheHighestLevelOfAnAmdVmIsItsL3) {
  const std::string cpu = TestDir("cpu0");
  AddCache(cpu, 0, "1", "Data", "32K");
  AddCache(cpu, 1, "1", "Instruction", "32K");
  AddCache(cpu, 2, "2", "Unified", "1024K");
  AddCache(cpu, 3, "3", "Unified", "32768K");
  const CacheSize size = LastLevelCacheFromSysfs(cpu);
  EXPECT_EQ(size.bytes, 32L << 20);
  EXPECT_NE(size.source.find("L3"), std::string::npos) << size.source;
}

TEST(LastLevelCacheFromSysfsTest, InstructionCachesAndUnparsableSizesAreSkipped) {
  const std::string cpu = TestDir("cpu0");
  AddCache(cpu, 0, "1", "Data", "48K");
  AddCache(cpu, 1, "2", "Unified", "2M");
  AddCache(cpu, 2, "3", "Instruction", "64M");  // not a data cache
  AddCache(cpu, 3, "3", "Unified", "lots");     // no size
  AddCache(cpu, 4, "x", "Unified", "8M");       // no level
  EXPECT_EQ(LastLevelCacheFromSysfs(cpu).bytes, 2L << 20);
}

TEST(LastLevelCacheFromSysfsTest, NoCacheDirectoryIsUnknown) {
  const std::string cpu = TestDir("cpu0");
  EXPECT_EQ(LastLevelCacheFromSysfs(cpu).bytes, 0);
  EXPECT_EQ(LastLevelCacheFromSysfs(cpu + "/missing").bytes, 0);
}

TEST(CacheFitTest, HalfTheCacheFitsTwiceItDoesNot) {
  const long l3 = 32L << 20;
  EXPECT_STREQ(CacheFit(16.0 * (1 << 20), l3), "in cache");
  EXPECT_STREQ(CacheFit(32.0 * (1 << 20), l3), "about the cache's size");
  EXPECT_STREQ(CacheFit(64.0 * (1 << 20), l3), "out of cache");
  EXPECT_STREQ(CacheFit(800e6, l3), "out of cache");
  EXPECT_STREQ(CacheFit(1.0, 0), "cache size unknown");
}

}  // namespace
}  // namespace gaptrain
