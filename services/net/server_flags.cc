#include "services/net/server_flags.h"

#include <algorithm>

namespace gaptrain {

void AddServerFlags(FlagSet* flags, ServerFlags* server, std::string* token_file) {
  flags->String("--job", &server->job_file);
  flags->String("--listen", &server->listen);
  flags->String("--http-address", &server->http_address);
  flags->Unsigned("--http-port", 0, 65535, &server->http_port);
  flags->String("--token-file", token_file);
  flags->Switch("--insecure-no-token", &server->allow_no_token);
  flags->String("--tls-cert", &server->tls_cert);
  flags->String("--tls-key", &server->tls_key);
  flags->String("--ports-file", &server->ports_file);
}

Status FinishServerFlags(const std::string& token_file, ServerFlags* server) {
  if (server->job_file.empty()) return Status::InvalidArgument("--job: is required");
  if (!IsHostPort(server->listen)) {
    return Status::InvalidArgument("--listen: must be HOST:PORT, got '" + server->listen + "'");
  }
  if (server->tls_cert.empty() != server->tls_key.empty()) {
    return Status::InvalidArgument("--tls-cert and --tls-key: give both or neither");
  }
  return ResolveJobToken(token_file, server->allow_no_token, &server->token);
}

std::string ServerFlagsUsage(const ServerFlags& defaults, const std::string& http_paths) {
  auto line = [](const std::string& flag, const std::string& meaning) {
    std::string padded = "  " + flag;
    padded.resize(std::max<size_t>(padded.size() + 1, 27), ' ');
    return padded + meaning + "\n";
  };
  return line("--listen HOST:PORT", "gRPC address [" + defaults.listen + "]") +
         line("--http-address HOST", http_paths + " address [" + defaults.http_address + "]") +
         line("--http-port PORT",
              "[" + std::to_string(defaults.http_port) + "]; 0 picks a free port") +
         line("--token-file PATH", "the job token (or $GAPTRAIN_TOKEN)") +
         line("--insecure-no-token", "accept calls without a token (tests only)") +
         line("--tls-cert PATH --tls-key PATH", "serve gRPC over TLS") +
         line("--ports-file PATH", "write the bound ports as \"GRPC HTTP\"");
}

}  // namespace gaptrain
