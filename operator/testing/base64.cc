#include "operator/testing/base64.h"

#include <openssl/evp.h>

#include <cctype>

namespace gaptrain {
namespace kube_testing {

std::string Base64Encode(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(&out[0]),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

bool Base64Decode(const std::string& text, std::string* bytes, long* error_offset) {
  auto in_alphabet = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/';
  };
  const size_t padding_at = text.find('=');
  const size_t data_end = padding_at == std::string::npos ? text.size() : padding_at;
  for (size_t i = 0; i < data_end; ++i) {
    if (!in_alphabet(text[i])) {
      *error_offset = static_cast<long>(i);
      return false;
    }
  }
  for (size_t i = data_end; i < text.size(); ++i) {
    if (text[i] != '=') {
      *error_offset = static_cast<long>(i);
      return false;
    }
  }
  if (text.size() % 4 != 0 || text.size() - data_end > 2) {
    *error_offset = static_cast<long>(text.size() - text.size() % 4);
    if (text.size() % 4 == 0) *error_offset = static_cast<long>(data_end);
    return false;
  }
  if (text.empty()) {
    bytes->clear();
    return true;
  }
  std::string out(text.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(&out[0]),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) {
    *error_offset = 0;
    return false;
  }
  // EVP_DecodeBlock counts the padding as zero bytes.
  out.resize(static_cast<size_t>(n) - (text.size() - data_end));
  *bytes = std::move(out);
  return true;
}

}  // namespace kube_testing
}  // namespace gaptrain
