#include "image/sha256.h"

#include <cstdlib>

namespace gaptrain {

Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
  // Out of memory or no SHA-256 in libcrypto: nothing sensible to return.
  if (context_ == nullptr || EVP_DigestInit_ex(context_, EVP_sha256(), nullptr) != 1) std::abort();
}

Sha256::~Sha256() { EVP_MD_CTX_free(context_); }

void Sha256::Update(const char* data, size_t size) {
  EVP_DigestUpdate(context_, data, size);
}

std::string Sha256::HexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(context_, digest, &length);
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

std::string Sha256::Of(const std::string& bytes) {
  Sha256 sha;
  sha.Update(bytes.data(), bytes.size());
  return sha.HexDigest();
}

}  // namespace gaptrain
