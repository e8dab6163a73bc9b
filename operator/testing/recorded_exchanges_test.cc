// Replays the exchanges recorded from a real kube-apiserver v1.26
// (../shared/k8s/recorded) against the fake API server, in the order they
// were recorded, and compares each response with the recorded one: status
// code, Content-Type, Status objects field by field, and objects key by key
// with equal values wherever they are deterministic (uids, resourceVersions
// and timestamps only need the right form). The watch streams are compared
// for their framing and events.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "operator/testing/server_test_base.h"
#include "services/testing/test_files.h"

namespace gaptrain {
namespace kube_testing {
namespace {

using nlohmann::json;

json LoadRecording(const std::string& name) {
  const std::string text = ReadRaw(SharedK8sDir() + "/recorded/" + name + ".json");
  EXPECT_FALSE(text.empty()) << "cannot read recording " << name;
  json j = json::parse(text, nullptr, false);
  return j.is_discarded() ? json() : j;
}

// managedFields sorted by manager, operation and subresource: the server
// sorts by time first, and a replay runs in other seconds than the recording.
json SortManagedFields(json j) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "managedFields" && it.value().is_array()) {
        std::vector<json> entries(it.value().begin(), it.value().end());
        std::sort(entries.begin(), entries.end(), [](const json& a, const json& b) {
          auto key = [](const json& e) {
            return e.value("manager", "") + "/" + e.value("operation", "") + "/" +
                   e.value("subresource", "");
          };
          return key(a) < key(b);
        });
        it.value() = entries;
      } else {
        it.value() = SortManagedFields(it.value());
      }
    }
  } else if (j.is_array()) {
    for (json& item : j) item = SortManagedFields(item);
  }
  return j;
}

bool IsVolatileKey(const std::string& key) {
  return key == "uid" || key == "resourceVersion" || key == "creationTimestamp" ||
         key == "time" || key == "deletionTimestamp" || key == "lastTransitionTime";
}

// Compares `actual` with `expected`: the same keys, equal values; the
// volatile fields only need the same form. Paths in `ignored` (and all
// below them) are left out.
void ExpectSameShape(const json& actual, const json& expected, const std::string& path,
                     const std::set<std::string>& ignored) {
  if (ignored.count(path)) return;
  if (expected.is_object()) {
    ASSERT_TRUE(actual.is_object()) << path << ": expected an object, got " << actual.dump();
    for (auto it = expected.begin(); it != expected.end(); ++it) {
      const std::string child = path + "." + it.key();
      if (ignored.count(child)) continue;
      if (!actual.contains(it.key())) {
        ADD_FAILURE() << child << " is missing";
        continue;
      }
      if (IsVolatileKey(it.key()) && it.value().is_string()) {
        ASSERT_TRUE(actual[it.key()].is_string()) << child;
        const std::string v = actual[it.key()].get<std::string>();
        if (it.key() == "uid") {
          EXPECT_TRUE(std::regex_match(v, std::regex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")))
              << child << " = " << v;
        } else if (it.key() == "resourceVersion") {
          EXPECT_TRUE(std::regex_match(v, std::regex("[1-9][0-9]*"))) << child << " = " << v;
        } else {
          EXPECT_TRUE(std::regex_match(v, std::regex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")))
              << child << " = " << v;
        }
        continue;
      }
      ExpectSameShape(actual[it.key()], it.value(), child, ignored);
    }
    for (auto it = actual.begin(); it != actual.end(); ++it) {
      const std::string child = path + "." + it.key();
      if (!expected.contains(it.key()) && !ignored.count(child)) {
        ADD_FAILURE() << child << " is not in the recording: " << it.value().dump();
      }
    }
  } else if (expected.is_array()) {
    ASSERT_TRUE(actual.is_array()) << path << ": expected a list, got " << actual.dump();
    ASSERT_EQ(actual.size(), expected.size()) << path << ": " << actual.dump();
    for (size_t i = 0; i < expected.size(); ++i) {
      ExpectSameShape(actual[i], expected[i], path + "[" + std::to_string(i) + "]", ignored);
    }
  } else {
    EXPECT_EQ(actual, expected) << path;
  }
}

class RecordedExchangesTest : public FakeApiServerTest {
 protected:
  // Sends the recorded request (with this server's token unless
  // `authorization` says otherwise), after `rewrite` adjusted its body.
  TestResponse Replay(const json& recording, const std::string& body_override = "",
                      const std::string& authorization = "Bearer test-token") {
    const json& request = recording["request"];
    const std::string method = request["method"];
    std::string target = request["path"];
    std::string body;
    if (!body_override.empty()) {
      body = body_override;
    } else if (request["body"].is_string()) {
      body = request["body"].get<std::string>();
    } else if (!request["body"].is_null()) {
      body = request["body"].dump();
    }
    std::vector<std::pair<std::string, std::string>> headers;
    if (!authorization.empty()) headers.push_back({"Authorization", authorization});
    const json& h = request["headers"];
    if (h.contains("Accept") && h["Accept"] != "application/json") {
      headers.push_back({"Accept", h["Accept"]});
    }
    TestClient client(server_->port(), "");
    return client.Send(method, target, body,
                       h.contains("Content-Type") ? h["Content-Type"].get<std::string>() : "",
                       headers);
  }

  // `text` with the recorded uids replaced by ours.
  std::string WithOurUids(std::string text) const {
    for (const auto& [recorded, ours] : uids_) {
      size_t at;
      while ((at = text.find(recorded)) != std::string::npos) text.replace(at, recorded.size(), ours);
    }
    return text;
  }

  // The recorded response body, with our uids.
  json ExpectedBody(const json& recording) const {
    return json::parse(WithOurUids(recording["response"]["body"].dump()));
  }

  // Status code, Content-Type and body shape.
  void ExpectMatches(const TestResponse& actual, const json& recording,
                     const std::set<std::string>& ignored = {}) {
    const json& response = recording["response"];
    EXPECT_EQ(actual.status, response["status"].get<int>()) << actual.body;
    EXPECT_EQ(actual.Header("Content-Type"), response["headers"]["Content-Type"]);
    EXPECT_EQ(actual.Header("Cache-Control"), "no-cache, private");
    ExpectSameShape(SortManagedFields(actual.json), SortManagedFields(ExpectedBody(recording)), "",
                    ignored);
  }

  // The recorded request body, with our uids.
  std::string Rewrite(const json& recording) const {
    return WithOurUids(recording["request"]["body"].is_string()
                           ? recording["request"]["body"].get<std::string>()
                           : recording["request"]["body"].dump());
  }

  void LearnUid(const json& recording, const TestResponse& response) {
    const json& body = recording["response"]["body"];
    if (body.is_object() && body.contains("metadata") && body["metadata"].contains("uid")) {
      uids_.push_back({body["metadata"]["uid"], response.json["metadata"]["uid"]});
    }
  }

  std::vector<std::pair<std::string, std::string>> uids_;  // recorded -> ours
};

TEST_F(RecordedExchangesTest, TheRecordedSessionReplays) {
  // The CRD as the server accepted it.
  json crd_get = LoadRecording("crd-get");
  TestResponse crd = Replay(crd_get);
  ExpectMatches(crd, crd_get,
                {".metadata.annotations", ".metadata.managedFields"});
  LearnUid(crd_get, crd);

  json discovery = LoadRecording("discovery-group-version");
  ExpectMatches(Replay(discovery), discovery);

  json create = LoadRecording("trainingjob-create");
  TestResponse created = Replay(create);
  LearnUid(create, created);
  ExpectMatches(created, create);
  const std::string created_rv = created.json["metadata"]["resourceVersion"];

  json duplicate = LoadRecording("trainingjob-create-duplicate");
  ExpectMatches(Replay(duplicate), duplicate);

  json invalid = LoadRecording("trainingjob-create-invalid");
  TestResponse rejected = Replay(invalid);
  EXPECT_EQ(rejected.Header("Warning"), invalid["response"]["headers"]["Warning"]);
  // The real server lists schema errors in map order (random); compare the
  // causes as a set and the message built from them.
  ExpectMatches(rejected, invalid, {".message", ".details.causes"});
  std::set<std::string> actual_causes, expected_causes;
  std::string list;
  for (const json& c : rejected.json["details"]["causes"]) {
    actual_causes.insert(c.dump());
    list += (list.empty() ? "" : ", ") + c["field"].get<std::string>() + ": " +
            c["message"].get<std::string>();
  }
  for (const json& c : invalid["response"]["body"]["details"]["causes"]) expected_causes.insert(c.dump());
  EXPECT_EQ(actual_causes, expected_causes);
  EXPECT_EQ(rejected.json["message"], "TrainingJob.gaptrain.io \"bad\" is invalid: [" + list + "]");

  json list_recording = LoadRecording("trainingjob-list");
  TestResponse listed = Replay(list_recording);
  ExpectMatches(listed, list_recording);
  EXPECT_EQ(listed.json["metadata"]["resourceVersion"], created_rv);

  json table = LoadRecording("trainingjob-get-table");
  TestResponse table_response = Replay(table);
  ExpectMatches(table_response, table, {".rows[0].cells[6]"});
  EXPECT_TRUE(std::regex_match(table_response.json["rows"][0]["cells"][6].get<std::string>(),
                               std::regex("[0-9]+s")));

  json not_found = LoadRecording("not-found");
  ExpectMatches(Replay(not_found), not_found);

  json status_patch = LoadRecording("trainingjob-status-merge-patch");
  TestResponse patched = Replay(status_patch);
  ExpectMatches(patched, status_patch);
  const std::string status_rv = patched.json["metadata"]["resourceVersion"];
  EXPECT_NE(status_rv, created_rv);

  json spec_ignored = LoadRecording("trainingjob-status-patch-spec-ignored");
  TestResponse ignored = Replay(spec_ignored);
  ExpectMatches(ignored, spec_ignored);
  EXPECT_EQ(ignored.json["metadata"]["resourceVersion"], status_rv);  // nothing written

  json table_status = LoadRecording("trainingjob-get-table-with-status");
  TestResponse table_status_response = Replay(table_status);
  // (The recording lacks the time of the status entry in the table's
  // managedFields, which the object it came from has.)
  ExpectMatches(table_status_response, table_status,
                {".rows[0].cells[6]", ".rows[0].object.metadata.managedFields[1].time"});

  json scale_get = LoadRecording("trainingjob-scale-get");
  ExpectMatches(Replay(scale_get), scale_get);

  json scale_put = LoadRecording("trainingjob-scale-put");
  TestResponse scaled = Replay(scale_put);
  ExpectMatches(scaled, scale_put);
  json job;
  ASSERT_TRUE(server_->Get("trainingjobs", "default", "mnist", &job).ok());
  EXPECT_EQ(job["spec"]["workers"]["replicas"], 6);
  EXPECT_EQ(job["metadata"]["generation"], 2);

  // The watch from the list's resourceVersion sees the status patch, the
  // scale, and what follows.
  json watch_events;
  std::unique_ptr<WatchReader> watch = OpenWatch(
      std::string(kJobs) + "?watch=1&allowWatchBookmarks=true&resourceVersion=" + created_rv +
      "&timeoutSeconds=1");
  ASSERT_NE(watch, nullptr);

  json patch_spec = LoadRecording("w-patch-spec");
  TestResponse spec_patched = Replay(patch_spec);
  ExpectMatches(spec_patched, patch_spec);
  EXPECT_EQ(spec_patched.json["metadata"]["generation"], 3);

  json create_second = LoadRecording("w-create-second");
  TestResponse second = Replay(create_second);
  LearnUid(create_second, second);
  ExpectMatches(second, create_second);

  json delete_second = LoadRecording("w-delete-second");
  ExpectMatches(Replay(delete_second), delete_second);

  std::vector<json> events;
  ASSERT_TRUE(watch->ReadToEnd(std::chrono::seconds(10), &events).ok());
  EXPECT_TRUE(watch->ended_cleanly());
  std::vector<json> recorded_events;
  {
    const std::string text = ReadRaw(SharedK8sDir() + "/recorded/watch-trainingjobs.events.jsonl");
    size_t start = 0;
    while (start < text.size()) {
      const size_t end = text.find('\n', start);
      recorded_events.push_back(json::parse(text.substr(start, end - start)));
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  ASSERT_EQ(events.size(), recorded_events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i]["type"], recorded_events[i]["type"]) << i;
    ExpectSameShape(SortManagedFields(events[i]),
                    SortManagedFields(json::parse(WithOurUids(recorded_events[i].dump()))),
                    "event" + std::to_string(i), {});
  }

  json conflict = LoadRecording("trainingjob-update-conflict");
  json stale = conflict["request"]["body"];
  stale["metadata"]["resourceVersion"] = created_rv;
  stale["metadata"]["uid"] = job["metadata"]["uid"];
  ExpectMatches(Replay(conflict, stale.dump()), conflict);

  json sa = LoadRecording("serviceaccount-create");
  TestResponse sa_created = Replay(sa);
  LearnUid(sa, sa_created);
  ExpectMatches(sa_created, sa);

  json apply = LoadRecording("pod-server-side-apply");
  TestResponse applied = Replay(apply, Rewrite(apply));
  LearnUid(apply, applied);
  // The service account token volume comes from admission plugins the fake
  // server does not run.
  const std::set<std::string> admission = {".spec.volumes",
                                           ".spec.containers[0].volumeMounts"};
  ExpectMatches(applied, apply, admission);
  const std::string pod_rv = applied.json["metadata"]["resourceVersion"];

  json apply_again = LoadRecording("pod-server-side-apply-again");
  TestResponse again = Replay(apply_again, Rewrite(apply_again));
  ExpectMatches(again, apply_again, admission);
  EXPECT_EQ(again.json["metadata"]["resourceVersion"], pod_rv);

  json apply_conflict = LoadRecording("pod-apply-conflict");
  ExpectMatches(Replay(apply_conflict, Rewrite(apply_conflict)), apply_conflict);

  json disruption = LoadRecording("pod-status-disruption-target");
  ExpectMatches(Replay(disruption), disruption, admission);

  json eviction = LoadRecording("pod-eviction");
  ExpectMatches(Replay(eviction), eviction);
  json after_eviction = LoadRecording("pod-after-eviction");
  ExpectMatches(Replay(after_eviction), after_eviction);

  json selected = LoadRecording("pod-list-selector");
  ExpectMatches(Replay(selected), selected);

  json lease_create = LoadRecording("lease-create");
  TestResponse lease = Replay(lease_create);
  LearnUid(lease_create, lease);
  ExpectMatches(lease, lease_create);
  const std::string lease_rv = lease.json["metadata"]["resourceVersion"];

  json renew = LoadRecording("lease-renew");
  json renew_body = json::parse(Rewrite(renew));
  renew_body["metadata"]["resourceVersion"] = lease_rv;
  TestResponse renewed = Replay(renew, renew_body.dump());
  ExpectMatches(renewed, renew);
  EXPECT_NE(renewed.json["metadata"]["resourceVersion"], lease_rv);

  json steal = LoadRecording("lease-steal-conflict");
  json steal_body = json::parse(Rewrite(steal));
  steal_body["metadata"]["resourceVersion"] = lease_rv;
  ExpectMatches(Replay(steal, steal_body.dump()), steal);

  json foreground = LoadRecording("delete-foreground");
  TestResponse deleting = Replay(foreground);
  ExpectMatches(deleting, foreground);

  json event = LoadRecording("event-create");
  TestResponse event_created = Replay(event, Rewrite(event));
  ExpectMatches(event_created, event, {".metadata.name"});
  EXPECT_TRUE(std::regex_match(event_created.json["metadata"]["name"].get<std::string>(),
                               std::regex("mnist-[bcdfghjklmnpqrstvwxz2456789]{5}")));

  json unauthorized = LoadRecording("unauthorized");
  ExpectMatches(Replay(unauthorized, "", "Bearer wrong-token"), unauthorized);
  json forbidden = LoadRecording("forbidden");
  ExpectMatches(Replay(forbidden, "", ""), forbidden);
}

// watch-too-old.http, byte for byte apart from the resourceVersion numbers.
TEST_F(RecordedExchangesTest, AnExpiredWatchIsTheRecordedErrorEvent) {
  ASSERT_EQ(client_->Post(kJobs, TrainingJobBody("mnist")).status, 201);
  server_->ExpireWatchHistory();
  const std::string oldest = std::to_string(server_->resource_version());
  std::unique_ptr<WatchReader> watch =
      OpenWatch(std::string(kJobs) + "?watch=1&resourceVersion=1");
  ASSERT_NE(watch, nullptr);
  std::vector<json> events;
  ASSERT_TRUE(watch->ReadToEnd(std::chrono::seconds(10), &events).ok());
  ASSERT_TRUE(watch->ended_cleanly());

  const std::string recorded = ReadRaw(SharedK8sDir() + "/recorded/watch-too-old.http");
  ASSERT_FALSE(recorded.empty());
  // The recorded event line, with our oldest resourceVersion.
  const size_t line_start = recorded.find("{\"type\"");
  std::string line = recorded.substr(line_start, recorded.find('\n', line_start) + 1 - line_start);
  line.replace(line.find("(213)"), 5, "(" + oldest + ")");
  char size[16];
  std::snprintf(size, sizeof(size), "%zx", line.size());
  const std::string expected_body = std::string(size) + "\r\n" + line + "\r\n0\r\n\r\n";
  const std::string& raw = watch->raw();
  const size_t head_end = raw.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos);
  EXPECT_EQ(raw.substr(head_end + 4), expected_body);
  const std::string head = raw.substr(0, head_end + 2);
  EXPECT_EQ(head.substr(0, 17), "HTTP/1.1 200 OK\r\n");
  EXPECT_NE(head.find("\r\nContent-Type: application/json\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nTransfer-Encoding: chunked\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nCache-Control: no-cache, private\r\n"), std::string::npos) << head;

  // watch-too-old-plain: the same with timeoutSeconds, decoded.
  json plain = LoadRecording("watch-too-old-plain");
  std::unique_ptr<WatchReader> again = OpenWatch(plain["request"]["path"].get<std::string>());
  ASSERT_NE(again, nullptr);
  json event;
  ASSERT_TRUE(again->Next(std::chrono::seconds(10), &event).ok());
  json expected = plain["response"]["body"];
  expected["object"]["message"] = "too old resource version: 1 (" + oldest + ")";
  EXPECT_EQ(event, expected);
}

// watch-trainingjobs.http: one event per chunk, each a JSON object and a
// newline, lower-case hex sizes, the terminating chunk at the end.
TEST_F(RecordedExchangesTest, WatchFramingMatchesTheRecording) {
  ASSERT_EQ(client_->Post(kJobs, TrainingJobBody("mnist")).status, 201);
  const std::string rv = std::to_string(server_->resource_version());
  std::unique_ptr<WatchReader> watch = OpenWatch(
      std::string(kJobs) + "?watch=1&allowWatchBookmarks=true&resourceVersion=" + rv +
      "&timeoutSeconds=1");
  ASSERT_EQ(client_->MergePatch(std::string(kJobs) + "/mnist", {{"spec", {{"training", {{"epochs", 5}}}}}}).status, 200);
  std::vector<json> events;
  ASSERT_TRUE(watch->ReadToEnd(std::chrono::seconds(10), &events).ok());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["type"], "MODIFIED");
  EXPECT_EQ(events[1]["type"], "BOOKMARK");

  const std::string& raw = watch->raw();
  std::string body = raw.substr(raw.find("\r\n\r\n") + 4);
  const std::regex chunk("([0-9a-f]+)\r\n");
  size_t chunks = 0;
  while (true) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(body, m, chunk, std::regex_constants::match_continuous)) << body;
    const size_t n = std::stoul(m[1].str(), nullptr, 16);
    body.erase(0, m.length(0));
    if (n == 0) {
      EXPECT_EQ(body, "\r\n");
      break;
    }
    const std::string data = body.substr(0, n);
    EXPECT_EQ(data.find('\n'), n - 1) << "one event per chunk, newline-terminated";
    EXPECT_EQ(data.substr(0, 8), "{\"type\":");
    EXPECT_EQ(body.substr(n, 2), "\r\n");
    body.erase(0, n + 2);
    ++chunks;
  }
  EXPECT_EQ(chunks, 2u);
  // The bookmark is exactly the recorded shape.
  const std::string recorded = ReadRaw(SharedK8sDir() + "/recorded/watch-trainingjobs.http");
  const size_t bookmark = recorded.find("{\"type\":\"BOOKMARK\"");
  ASSERT_NE(bookmark, std::string::npos);
  std::string expected = recorded.substr(bookmark, recorded.find('\n', bookmark) - bookmark);
  expected.replace(expected.find("\"219\""), 5, "\"" + events[1]["object"]["metadata"]["resourceVersion"].get<std::string>() + "\"");
  EXPECT_NE(raw.find(expected + "\n"), std::string::npos) << raw;
}

}  // namespace
}  // namespace kube_testing
}  // namespace gaptrain
