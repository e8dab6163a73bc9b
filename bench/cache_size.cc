#include "bench/cache_size.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace gaptrain {
namespace {

bool ReadLine(const std::string& path, std::string* line) {
  std::ifstream in(path);
  return static_cast<bool>(std::getline(in, *line));
}

// "32768K", "1M", "512": bytes, or 0 when it is none of these.
long ParseSize(const std::string& text) {
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || value <= 0) return 0;
  const std::string unit(end);
  if (unit.empty()) return value;
  if (unit == "K") return value << 10;
  if (unit == "M") return value << 20;
  if (unit == "G") return value << 30;
  return 0;
}

}  // namespace

CacheSize LastLevelCacheFromSysfs(const std::string& cpu_dir) {
  CacheSize best;
  const std::string cache_dir = cpu_dir + "/cache";
  DIR* dir = opendir(cache_dir.c_str());
  if (dir == nullptr) return best;
  int best_level = 0;
  while (const dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name.rfind("index", 0) != 0) continue;
    const std::string index = cache_dir + "/" + name;
    std::string level_text, type, size_text;
    if (!ReadLine(index + "/level", &level_text) || !ReadLine(index + "/type", &type) ||
        !ReadLine(index + "/size", &size_text)) {
      continue;
    }
    const int level = std::atoi(level_text.c_str());
    const long bytes = ParseSize(size_text);
    if (type == "Instruction" || level <= 0 || bytes == 0) continue;
    if (level > best_level || (level == best_level && bytes > best.bytes)) {
      best_level = level;
      best.bytes = bytes;
      best.source = "L" + std::to_string(level) + ", " + cache_dir;
    }
  }
  closedir(dir);
  return best;
}

CacheSize LastLevelCache() {
  CacheSize size = LastLevelCacheFromSysfs("/sys/devices/system/cpu/cpu0");
  if (size.bytes > 0) return size;
  for (int name : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    const long bytes = sysconf(name);
    if (bytes > 0) {
      size.bytes = bytes;
      size.source = name == _SC_LEVEL3_CACHE_SIZE ? "L3, sysconf" : "L2, sysconf";
      return size;
    }
  }
  return size;
}

const char* CacheFit(double bytes, long cache_bytes) {
  if (cache_bytes <= 0) return "cache size unknown";
  const double cache = static_cast<double>(cache_bytes);
  if (bytes <= cache / 2) return "in cache";
  if (bytes >= 2 * cache) return "out of cache";
  return "about the cache's size";
}

}  // namespace gaptrain
