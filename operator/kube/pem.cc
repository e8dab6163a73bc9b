#include "operator/kube/pem.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <climits>
#include <memory>

namespace gaptrain {
namespace kube {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};

std::unique_ptr<BIO, BioFree> MemoryBio(const std::string& pem) {
  if (pem.size() > INT_MAX) return nullptr;
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

std::string Why(const char* fallback) {
  std::string errors = TakeOpensslErrors();
  return errors.empty() ? fallback : errors;
}

}  // namespace

std::string TakeOpensslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

Status CheckCertificatesPem(const std::string& pem) {
  ERR_clear_error();
  auto bio = MemoryBio(pem);
  if (bio == nullptr) return Status::InvalidArgument("not a PEM certificate: too large");
  int count = 0;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    X509_free(cert);
    ++count;
  }
  // Reading stops with "no start line" at the end; anything else is damage.
  const unsigned long last = ERR_peek_last_error();
  if (count > 0 && ERR_GET_REASON(last) == PEM_R_NO_START_LINE) {
    ERR_clear_error();
    return Status::OK();
  }
  return Status::InvalidArgument("not a PEM certificate: " + Why("no certificate found"));
}

Status CheckPrivateKeyPem(const std::string& pem) {
  ERR_clear_error();
  auto bio = MemoryBio(pem);
  if (bio == nullptr) return Status::InvalidArgument("not a PEM private key: too large");
  // A null password callback would prompt on the terminal for encrypted keys.
  pem_password_cb* no_password = [](char*, int, int, void*) { return 0; };
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio.get(), nullptr, no_password, nullptr);
  if (key == nullptr) {
    return Status::InvalidArgument("not a PEM private key: " + Why("no key found"));
  }
  EVP_PKEY_free(key);
  ERR_clear_error();
  return Status::OK();
}

}  // namespace kube
}  // namespace gaptrain
