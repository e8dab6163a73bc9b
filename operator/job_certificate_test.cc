// A job's certificate as TLS clients check it: it names every Service name
// the job's pods dial (and no other), is its own CA, signs with its key,
// and each issue is a new key.

#include "operator/job_certificate.h"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <string>

namespace gaptrain {
namespace {

X509* ParseCert(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return cert;
}

EVP_PKEY* ParseKey(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return key;
}

TEST(JobCertificateTest, ServesTheJobsNamesAndIsItsOwnCa) {
  JobCertificate issued;
  ASSERT_TRUE(IssueJobCertificate({"mnist-master", "mnist-master.research.svc",
                                   "mnist-coordinator.research.svc"},
                                  3650, &issued)
                  .ok());
  X509* cert = ParseCert(issued.cert_pem);
  ASSERT_NE(cert, nullptr) << issued.cert_pem;
  EVP_PKEY* key = ParseKey(issued.key_pem);
  ASSERT_NE(key, nullptr);
  EXPECT_EQ(X509_check_private_key(cert, key), 1);
  // Self-signed, a CA: trusting it is trusting the job's servers.
  EVP_PKEY* public_key = X509_get0_pubkey(cert);
  EXPECT_EQ(X509_verify(cert, public_key), 1);
  EXPECT_EQ(X509_check_ca(cert), 1);
  EXPECT_EQ(X509_check_purpose(cert, X509_PURPOSE_SSL_SERVER, 0), 1);
  for (const char* name : {"mnist-master", "mnist-master.research.svc",
                           "mnist-coordinator.research.svc"}) {
    EXPECT_EQ(X509_check_host(cert, name, 0, 0, nullptr), 1) << name;
  }
  EXPECT_NE(X509_check_host(cert, "other-master.research.svc", 0, 0, nullptr), 1);
  // Valid now, for years.
  EXPECT_LT(X509_cmp_current_time(X509_get0_notBefore(cert)), 0);
  EXPECT_GT(X509_cmp_time(X509_get0_notAfter(cert), nullptr), 0);

  JobCertificate again;
  ASSERT_TRUE(IssueJobCertificate({"mnist-master"}, 1, &again).ok());
  EXPECT_NE(again.key_pem, issued.key_pem);
  X509_free(cert);
  EVP_PKEY_free(key);
}

TEST(JobCertificateTest, RefusesNoNames) {
  JobCertificate issued;
  EXPECT_FALSE(IssueJobCertificate({}, 30, &issued).ok());
  EXPECT_FALSE(IssueJobCertificate({"a"}, 0, &issued).ok());
}

}  // namespace
}  // namespace gaptrain
