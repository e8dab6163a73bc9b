// `gaptrain crd`: prints the TrainingJob CustomResourceDefinition
// (trainingjob_crd.h), or writes it to a file; scripts/generate-crd.sh
// rewrites the committed copy with it.

#ifndef GAPTRAIN_OPERATOR_CRD_CRD_COMMAND_H_
#define GAPTRAIN_OPERATOR_CRD_CRD_COMMAND_H_

#include <string>
#include <vector>

namespace gaptrain {

// Exit codes: 0 printed or written; 1 the file could not be written; 2 bad
// usage.
int CrdCommand(const std::vector<std::string>& args);

// The same, with what would go to stdout appended to *out and what would go
// to stderr to *err.
int CrdCommand(const std::vector<std::string>& args, std::string* out, std::string* err);

}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_CRD_CRD_COMMAND_H_
