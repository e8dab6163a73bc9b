// Sha256: an incremental SHA-256 (OpenSSL's), for the content digests of
// OCI images ("sha256:" + 64 lowercase hex digits).

#ifndef GAPTRAIN_IMAGE_SHA256_H_
#define GAPTRAIN_IMAGE_SHA256_H_

#include <openssl/evp.h>

#include <cstddef>
#include <string>

namespace gaptrain {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(const char* data, size_t size);
  // The digest of everything passed to Update, as 64 lowercase hex digits.
  // Call once.
  std::string HexDigest();

  // The hex digest of `bytes`.
  static std::string Of(const std::string& bytes);

 private:
  EVP_MD_CTX* context_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_IMAGE_SHA256_H_
