#include "services/net/token_auth.h"

namespace gaptrain {
namespace {

bool SameSecret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

bool BearerMatches(const std::string& authorization, const std::string& token) {
  return SameSecret(authorization, "Bearer " + token);
}

grpc::Status AuthorizeBearer(const grpc::ServerContextBase& context, const std::string& token) {
  if (token.empty()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "missing 'authorization: Bearer <job token>' metadata");
  }
  const std::string value(it->second.data(), it->second.size());
  if (!BearerMatches(value, token)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "wrong job token");
  }
  return grpc::Status::OK;
}

}  // namespace gaptrain
