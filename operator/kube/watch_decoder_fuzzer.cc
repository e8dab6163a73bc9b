// Fuzz target: the watch-stream decoder (watch_decoder.h) and the decoding
// of the API server's error bodies (api_error.h). Input: byte 0 says into
// how many pieces (1 to 8) the rest is cut, at positions taken from the
// next bytes; the rest is a whole HTTP/1.1 watch response as it comes off
// the socket. Contract:
//   - malformed input is DATA_LOSS with a message, never a crash, and
//     never a read outside the piece given to Feed (each piece is copied
//     to a block of exactly its size);
//   - once failed the decoder stays failed and emits nothing more;
//   - the events and the outcome do not depend on how the bytes were cut:
//     the same input fed whole gives the same events;
//   - an ERROR event, and the body of a response other than 200, decode to
//     an error Status.

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "operator/kube/api_error.h"
#include "operator/kube/watch_decoder.h"
#include "services/testing/fuzz_contract.h"

namespace gaptrain {
namespace kube {
namespace {

struct Outcome {
  std::vector<WatchEvent> events;
  Status status;  // the first error, or Finish()'s
};

// Small limits so that short inputs reach them.
WatchDecoder::Limits SmallLimits() {
  WatchDecoder::Limits limits;
  limits.max_header_bytes = 2048;
  limits.max_line_bytes = 4096;
  limits.max_error_body_bytes = 1024;
  return limits;
}

Outcome Decode(const std::vector<std::string>& pieces, WatchDecoder* decoder) {
  Outcome outcome;
  for (const std::string& piece : pieces) {
    std::unique_ptr<char[]> exact(new char[piece.size()]);
    if (!piece.empty()) std::memcpy(exact.get(), piece.data(), piece.size());
    Status fed = decoder->Feed(exact.get(), piece.size(), &outcome.events);
    if (!fed.ok()) {
      FuzzExpectRejection(fed, {Status::Code::kDataLoss}, "WatchDecoder::Feed");
      outcome.status = fed;
      // Stays failed: more bytes give the error again and no events.
      const size_t at_failure = outcome.events.size();
      Status again = decoder->Feed("{}\n", 3, &outcome.events);
      FuzzExpect(!again.ok(), "WatchDecoder::Feed succeeded after failing");
      FuzzExpect(outcome.events.size() == at_failure, "events after a failure");
      return outcome;
    }
  }
  outcome.status = decoder->Finish(&outcome.events);
  if (!outcome.status.ok()) {
    FuzzExpectRejection(outcome.status, {Status::Code::kDataLoss}, "WatchDecoder::Finish");
  }
  return outcome;
}

bool SameEvents(const std::vector<WatchEvent>& a, const std::vector<WatchEvent>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].type != b[i].type || a[i].object != b[i].object) return false;
  }
  return true;
}

}  // namespace
}  // namespace kube
}  // namespace gaptrain

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gaptrain;
  using namespace gaptrain::kube;
  if (size == 0) return 0;
  size_t cuts = data[0] & 7;
  size_t pos = 1;
  if (cuts > size - pos) cuts = size - pos;
  const uint8_t* cut_bytes = data + pos;
  pos += cuts;
  const std::string response(reinterpret_cast<const char*>(data) + pos, size - pos);

  std::vector<std::string> pieces;
  size_t start = 0;
  for (size_t i = 0; i < cuts; ++i) {
    const size_t length = (response.size() - start) * cut_bytes[i] / 255;
    pieces.push_back(response.substr(start, length));
    start += length;
  }
  pieces.push_back(response.substr(start));

  WatchDecoder split_decoder(SmallLimits());
  const Outcome split = Decode(pieces, &split_decoder);
  WatchDecoder whole_decoder(SmallLimits());
  const Outcome whole = Decode({response}, &whole_decoder);
  FuzzExpect(split.status.ok() == whole.status.ok(),
             "the outcome depends on the cuts: " + split.status.ToString() + " vs " +
                 whole.status.ToString());
  if (split.status.ok()) {
    FuzzExpect(SameEvents(split.events, whole.events), "the events depend on the cuts");
  }

  for (const WatchEvent& event : whole.events) {
    event.ResourceVersion();
    if (event.type == WatchEvent::Type::kError) {
      Status error = WatchErrorStatus("watch trainingjobs", event);
      FuzzExpect(!error.ok(), "an ERROR event decoded to OK");
    }
  }
  if (whole_decoder.header_done() && whole_decoder.http_status() != 200) {
    const int http = whole_decoder.http_status();
    ApiError details;
    Status error = ApiErrorStatus("watch trainingjobs", http, whole_decoder.error_body(), &details);
    FuzzExpect(!error.ok(), "a " + std::to_string(http) + " answer decoded to OK");
    FuzzExpect(details.http_status == http, "ApiError lost the HTTP status");
  }
  return 0;
}
