// The coordinator's Status as JSON, for tools (`gaptrain status`, the
// operator, curl): GET /status on the HTTP port. Field names are camelCase
// like the TrainingJob status; times are RFC 3339 UTC; absent values
// (no evaluation yet, no loss reported) are null; `dataUnavailable` is
// there only while a trainer's data store is unreachable.
// docs/coordinator.md shows an example.

#ifndef GAPTRAIN_SERVICES_COORDINATOR_STATUS_JSON_H_
#define GAPTRAIN_SERVICES_COORDINATOR_STATUS_JSON_H_

#include <functional>
#include <string>

#include "services/coordinator/coordinator_state.h"
#include "services/net/http_server.h"

namespace gaptrain {

std::string JobStatusToJson(const JobStatus& status);

// Serves GET /status on `server`: 200 with JobStatusToJson(describe()),
// content type application/json. With a `status_token`, only to a request
// that carries "Authorization: Bearer <status_token>"; others get 401
// (WWW-Authenticate: Bearer) and nothing of the job.
void ServeStatus(HttpServer* server, std::function<JobStatus()> describe,
                 const std::string& status_token = "");

// "2024-05-01T12:00:00Z" for Unix seconds.
std::string Rfc3339(double unix_seconds);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COORDINATOR_STATUS_JSON_H_
