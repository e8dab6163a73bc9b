#include "operator/kube/bearer_token.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "operator/kube/cluster_config.h"

namespace gaptrain {
namespace kube {

BearerToken::BearerToken(std::string token, std::string file)
    : inline_token_(std::move(token)), file_(std::move(file)) {}

Status BearerToken::Current(std::string* token) {
  if (file_.empty()) {
    *token = inline_token_;
    return Status::OK();
  }
  std::lock_guard<std::mutex> lock(mu_);
  struct stat st;
  if (::stat(file_.c_str(), &st) != 0) {
    return Status::Unauthenticated("token file " + file_ + ": " + std::strerror(errno));
  }
  const bool unchanged = have_cached_ && st.st_ino == inode_ && st.st_size == size_ &&
                         st.st_mtim.tv_sec == mtime_.tv_sec &&
                         st.st_mtim.tv_nsec == mtime_.tv_nsec;
  if (!unchanged) {
    std::string contents;
    Status read = ReadTrimmedFile(file_, &contents);
    if (!read.ok()) return Status::Unauthenticated("token file " + read.message());
    if (contents.empty()) return Status::Unauthenticated("token file " + file_ + " is empty");
    cached_ = std::move(contents);
    have_cached_ = true;
    inode_ = st.st_ino;
    size_ = st.st_size;
    mtime_ = st.st_mtim;
  }
  *token = cached_;
  return Status::OK();
}

}  // namespace kube
}  // namespace gaptrain
