#include "operator/envtest/test_certificates.h"

#include <cstdlib>

#include "services/base/atomic_file.h"
#include "services/base/file_contents.h"

namespace gaptrain {
namespace envtest {

Status RunOpenssl(const std::string& dir, const std::string& args) {
  const std::string command = "cd '" + dir + "' && openssl " + args + " >>openssl.log 2>&1";
  if (std::system(command.c_str()) != 0) {
    std::string output;
    ReadFile(dir + "/openssl.log", &output).ok();
    if (output.size() > 2000) output = "..." + output.substr(output.size() - 2000);
    return Status::Internal("openssl " + args + " failed:\n" + output);
  }
  return Status::OK();
}

Status MakeTestCa(const std::string& dir, const std::string& name) {
  return RunOpenssl(dir, "req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
                         "-keyout " + name + ".key -out " + name + ".crt -days 2 -subj /CN=" +
                             name + " -addext basicConstraints=critical,CA:TRUE "
                                    "-addext keyUsage=critical,keyCertSign,cRLSign");
}

Status MakeTestLeaf(const std::string& dir, const std::string& name, const std::string& subject,
                    const std::string& ext, const std::string& ca) {
  GAPTRAIN_RETURN_IF_ERROR(
      RunOpenssl(dir, "req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " +
                          name + ".key -out " + name + ".csr -subj " + subject));
  GAPTRAIN_RETURN_IF_ERROR(WriteFileAtomically(dir + "/" + name + ".ext", ext.data(), ext.size()));
  return RunOpenssl(dir, "x509 -req -in " + name + ".csr -CA " + ca + ".crt -CAkey " + ca +
                             ".key -CAcreateserial -days 2 -out " + name + ".crt -extfile " +
                             name + ".ext");
}

}  // namespace envtest
}  // namespace gaptrain
