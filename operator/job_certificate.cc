#include "operator/job_certificate.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>

namespace gaptrain {
namespace {

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using PKey = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using Bio = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using Extension = std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION, X509_EXTENSION_free>>;

Status OpenSslError(const std::string& what) {
  return Status::Internal("issuing the job's certificate: " + what + " failed");
}

bool AddExtension(X509* cert, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  Extension ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  return ext != nullptr && X509_add_ext(cert, ext.get(), -1) == 1;
}

bool ToPem(bool key, void* object, std::string* out) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr) return false;
  const int ok = key ? PEM_write_bio_PrivateKey(bio.get(), static_cast<EVP_PKEY*>(object),
                                                nullptr, nullptr, 0, nullptr, nullptr)
                     : PEM_write_bio_X509(bio.get(), static_cast<X509*>(object));
  if (ok != 1) return false;
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  out->assign(data, static_cast<size_t>(size));
  return true;
}

}  // namespace

Status IssueJobCertificate(const std::vector<std::string>& dns_names, int valid_days,
                           JobCertificate* out) {
  if (dns_names.empty()) return Status::InvalidArgument("IssueJobCertificate: no DNS names");
  if (valid_days <= 0) return Status::InvalidArgument("IssueJobCertificate: valid_days <= 0");
  PKey key(EVP_EC_gen("P-256"));
  if (key == nullptr) return OpenSslError("EVP_EC_gen");
  Cert cert(X509_new());
  if (cert == nullptr) return OpenSslError("X509_new");
  X509_set_version(cert.get(), 2);  // v3
  // A random 128-bit serial, as RFC 5280 asks of a CA.
  unsigned char serial_bytes[16];
  if (RAND_bytes(serial_bytes, sizeof serial_bytes) != 1) return OpenSslError("RAND_bytes");
  serial_bytes[0] &= 0x7f;  // positive
  BIGNUM* serial = BN_bin2bn(serial_bytes, sizeof serial_bytes, nullptr);
  if (serial == nullptr || BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(cert.get())) == nullptr) {
    BN_free(serial);
    return OpenSslError("the serial number");
  }
  BN_free(serial);
  // From an hour ago: nodes' clocks differ.
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(valid_days) * 86400);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("gaptrain"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(dns_names[0].c_str()), -1, -1,
                             0);
  X509_set_issuer_name(cert.get(), name);
  if (X509_set_pubkey(cert.get(), key.get()) != 1) return OpenSslError("X509_set_pubkey");
  std::string alt_names;
  for (const std::string& dns : dns_names) {
    alt_names += (alt_names.empty() ? "DNS:" : ",DNS:") + dns;
  }
  if (!AddExtension(cert.get(), NID_basic_constraints, "critical,CA:TRUE") ||
      !AddExtension(cert.get(), NID_key_usage, "critical,digitalSignature,keyCertSign") ||
      !AddExtension(cert.get(), NID_ext_key_usage, "serverAuth") ||
      !AddExtension(cert.get(), NID_subject_key_identifier, "hash") ||
      !AddExtension(cert.get(), NID_subject_alt_name, alt_names)) {
    return OpenSslError("the extensions");
  }
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) return OpenSslError("X509_sign");
  JobCertificate issued;
  if (!ToPem(false, cert.get(), &issued.cert_pem) || !ToPem(true, key.get(), &issued.key_pem)) {
    return OpenSslError("PEM encoding");
  }
  *out = std::move(issued);
  return Status::OK();
}

}  // namespace gaptrain
