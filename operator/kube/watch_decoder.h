// WatchDecoder: turns the bytes of a watch response, as they arrive, into
// watch events. The input is the whole HTTP/1.1 response (status line,
// headers, then a chunked or length-delimited body of newline-terminated
// JSON objects, {"type": ..., "object": {...}}); it may be split anywhere:
// an event across chunks, several events in one chunk, a chunk header cut
// in two.
//
// What callers may rely on:
//   - Feed never reads outside the bytes it is given, never throws, and
//     copes with any input (it is a fuzz target). Malformed input (bad
//     HTTP, a line that is not a JSON object with a known "type" and an
//     "object", a line longer than max_line_bytes) yields DATA_LOSS naming
//     the problem; the decoder then stays failed.
//   - Events come out in order, each exactly once, however the bytes were
//     split.
//   - A response other than 200 is not decoded as events: its body (up to
//     max_error_body_bytes) is kept for the caller to report.
//   - Finish(), at end of input, says whether the response was complete: an
//     unterminated chunked body or a partial last line is DATA_LOSS.

#ifndef GAPTRAIN_OPERATOR_KUBE_WATCH_DECODER_H_
#define GAPTRAIN_OPERATOR_KUBE_WATCH_DECODER_H_

#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {
namespace kube {

struct WatchEvent {
  enum class Type { kAdded, kModified, kDeleted, kBookmark, kError };
  Type type = Type::kAdded;
  // The object; for kError a metav1.Status; for kBookmark only
  // metadata.resourceVersion is meaningful.
  nlohmann::json object;

  // object.metadata.resourceVersion, or "" when absent.
  std::string ResourceVersion() const;
};

// "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR".
const char* WatchEventTypeName(WatchEvent::Type type);

// For a kError event: the Status its object describes, coded as for failed
// calls (a 410 Expired/Gone is OUT_OF_RANGE, so IsGone() holds), with
// `what` leading the message.
Status WatchErrorStatus(const std::string& what, const WatchEvent& event);

class WatchDecoder {
 public:
  struct Limits {
    // The status line and fields with the blank line that ends them.
    size_t max_header_bytes = 64 * 1024;
    size_t max_line_bytes = size_t{32} << 20;
    size_t max_error_body_bytes = 1 << 20;
  };

  WatchDecoder() : WatchDecoder(Limits()) {}
  explicit WatchDecoder(const Limits& limits);

  // Consumes all of data[0, size) and appends the events completed by it.
  Status Feed(const char* data, size_t size, std::vector<WatchEvent>* events);

  // The input ended: OK when the response was complete (or, for a body
  // without a length, ends on a line boundary).
  Status Finish(std::vector<WatchEvent>* events);

  bool header_done() const { return parser_.is_header_done(); }
  // The HTTP status; 0 until the header is done.
  int http_status() const { return header_done() ? static_cast<int>(parser_.get().result_int()) : 0; }
  // True once the body ended (the final chunk, or Content-Length reached).
  bool done() const { return parser_.is_done(); }
  // The body of a response other than 200.
  const std::string& error_body() const { return error_body_; }

 private:
  Status Fail(const std::string& why);
  // Counts header bytes in data[0, size) up to the blank line that ends
  // the header; fails past max_header_bytes. Beast's own limit depends on
  // how the bytes arrive (a header over the limit passed when cut in two),
  // so this one, over the byte stream itself, decides.
  Status CountHeader(const char* data, size_t size);
  // Moves body bytes the parser produced into lines, and lines into events.
  Status TakeBody(std::vector<WatchEvent>* events);
  Status DecodeLine(const std::string& line, std::vector<WatchEvent>* events);

  const Limits limits_;
  boost::beast::http::response_parser<boost::beast::http::string_body> parser_;
  std::string unparsed_;  // bytes given to Feed, not yet taken by the parser
  std::string line_;      // the current, unterminated line
  std::string error_body_;
  Status failure_;
  size_t header_bytes_ = 0;       // counted so far
  int header_end_matched_ = 0;    // characters of "\r\n\r\n" just seen; 4: the header ended
};

}  // namespace kube
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_KUBE_WATCH_DECODER_H_
