// BearerToken: the token a request carries in "Authorization: Bearer".
// Bound service-account tokens rotate (the kubelet rewrites the projected
// file about hourly), so a token file is read again whenever it changed
// (inode, size or modification time) since the last read; the file is
// stat'ed once per request, which costs microseconds.
//
// Thread-safe.

#ifndef GAPTRAIN_OPERATOR_KUBE_BEARER_TOKEN_H_
#define GAPTRAIN_OPERATOR_KUBE_BEARER_TOKEN_H_

#include <sys/types.h>

#include <ctime>
#include <mutex>
#include <string>

#include "services/base/status.h"

namespace gaptrain {
namespace kube {

class BearerToken {
 public:
  // `file` wins over `token` when both are given; neither means no token.
  BearerToken(std::string token, std::string file);

  // Sets *token to the token to send now ("" for none); a file's token
  // without its surrounding whitespace. UNAUTHENTICATED naming the file
  // when it cannot be read or is empty.
  Status Current(std::string* token);

 private:
  const std::string inline_token_;
  const std::string file_;

  std::mutex mu_;
  std::string cached_;
  bool have_cached_ = false;
  ino_t inode_ = 0;
  off_t size_ = 0;
  timespec mtime_{};
};

}  // namespace kube
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_KUBE_BEARER_TOKEN_H_
