// ServerFlags: the flags gaptrain-master and gaptrain-coordinator share:
// the job file, where they serve gRPC and HTTP, the job token, TLS and the
// ports file launchers wait for. Each binary declares these once through
// AddServerFlags, beside its own flags, so both parse and check them alike.

#ifndef GAPTRAIN_SERVICES_NET_SERVER_FLAGS_H_
#define GAPTRAIN_SERVICES_NET_SERVER_FLAGS_H_

#include <cstdint>
#include <string>
#include <utility>

#include "services/base/flag_values.h"
#include "services/base/status.h"

namespace gaptrain {

struct ServerFlags {
  std::string job_file;                  // --job (required)
  std::string listen;                    // --listen HOST:PORT: gRPC
  std::string http_address = "0.0.0.0";  // --http-address: /metrics, /healthz, ...
  uint16_t http_port = 0;                // --http-port (0: ephemeral)
  std::string token;                     // --token-file, or $GAPTRAIN_TOKEN
  bool allow_no_token = false;           // --insecure-no-token (tests only)
  std::string tls_cert;                  // --tls-cert and --tls-key: serve TLS
  std::string tls_key;
  std::string ports_file;                // --ports-file: "GRPC HTTP" once listening

  // A binary's defaults: its gRPC address and HTTP port.
  static ServerFlags Defaults(std::string listen, uint16_t http_port) {
    ServerFlags flags;
    flags.listen = std::move(listen);
    flags.http_port = http_port;
    return flags;
  }
};

// Declares the shared flags on `flags`; parsed values go into `server`,
// whose current values are the defaults. --token-file's path goes to
// *token_file for FinishServerFlags.
void AddServerFlags(FlagSet* flags, ServerFlags* server, std::string* token_file);

// After flags->Parse(): checks the flags together (--job given, --listen
// HOST:PORT, --tls-cert with --tls-key) and resolves the job token.
// Errors name the flag.
Status FinishServerFlags(const std::string& token_file, ServerFlags* server);

// The shared flags' usage lines, showing `defaults`' address and port, and
// `http_paths` ("/metrics and /healthz") as what the HTTP port serves.
std::string ServerFlagsUsage(const ServerFlags& defaults, const std::string& http_paths);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_NET_SERVER_FLAGS_H_
