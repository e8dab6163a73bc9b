// Files for tests: a directory per test, and writing or reading whole
// files, plain or gzip.

#ifndef GAPTRAIN_SERVICES_TESTING_TEST_FILES_H_
#define GAPTRAIN_SERVICES_TESTING_TEST_FILES_H_

#include <string>
#include <vector>

namespace gaptrain {

// "<TEST_TMPDIR>/<prefix>_<running test's name>", created if missing.
std::string TestDir(const std::string& prefix);

// These fail the running test (gtest ASSERT) on an I/O error.
void WriteRaw(const std::string& path, const std::string& bytes);
void WriteGzip(const std::string& path, const std::string& bytes);

// The file's bytes; "" when it cannot be read.
std::string ReadRaw(const std::string& path);

// The paths ("dir/name") of the entries of `dir` whose names end in
// `suffix`, sorted; none when `dir` cannot be read.
std::vector<std::string> FilesEndingIn(const std::string& dir, const std::string& suffix);

// True when something (file, directory, live symlink) is at `path`.
bool PathExists(const std::string& path);

// `path` (e.g. a runfile, relative to the test's directory) made absolute,
// links resolved, for configurations that want absolute paths; `path`
// itself when it does not exist.
std::string AbsolutePath(const std::string& path);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_TESTING_TEST_FILES_H_
