#include "operator/kube/watch_decoder.h"

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <cstdint>

#include "operator/kube/api_error.h"
#include "operator/kube/json_text.h"

namespace gaptrain {
namespace kube {

namespace http = boost::beast::http;

namespace {

bool ParseType(const std::string& name, WatchEvent::Type* type) {
  static const WatchEvent::Type kTypes[] = {WatchEvent::Type::kAdded, WatchEvent::Type::kModified,
                                            WatchEvent::Type::kDeleted, WatchEvent::Type::kBookmark,
                                            WatchEvent::Type::kError};
  for (WatchEvent::Type t : kTypes) {
    if (name == WatchEventTypeName(t)) {
      *type = t;
      return true;
    }
  }
  return false;
}

bool IsBlank(const std::string& s) {
  return s.find_first_not_of(" \t\r") == std::string::npos;
}

}  // namespace

const char* WatchEventTypeName(WatchEvent::Type type) {
  switch (type) {
    case WatchEvent::Type::kAdded: return "ADDED";
    case WatchEvent::Type::kModified: return "MODIFIED";
    case WatchEvent::Type::kDeleted: return "DELETED";
    case WatchEvent::Type::kBookmark: return "BOOKMARK";
    case WatchEvent::Type::kError: return "ERROR";
  }
  return "?";
}

std::string WatchEvent::ResourceVersion() const {
  if (!object.is_object()) return "";
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return "";
  auto rv = metadata->find("resourceVersion");
  return rv != metadata->end() && rv->is_string() ? rv->get<std::string>() : "";
}

Status WatchErrorStatus(const std::string& what, const WatchEvent& event) {
  ApiError error;
  if (!ParseStatusObject(event.object, &error)) {
    return Status::DataLoss(what + ": ERROR event without a Status: " +
                            Excerpt(event.object.dump()));
  }
  return Status(CodeForHttp(error.http_status, error.reason),
                what + ": " + std::to_string(error.http_status) + " " + error.reason + ": " +
                    error.message);
}

WatchDecoder::WatchDecoder(const Limits& limits) : limits_(limits) {
  // Not eager until the header is done: Beast 1.81's eager loop goes on
  // past a header it has just refused (a Content-Length over the body
  // limit) and reserves that length anyway. Feed turns eagerness on once
  // the header passed.
  parser_.eager(false);
  // CountHeader enforces max_header_bytes; Beast's looser limit only
  // bounds its own buffering.
  parser_.header_limit(static_cast<std::uint32_t>(
      std::min<size_t>(2 * limits.max_header_bytes + 64, UINT32_MAX)));
}

Status WatchDecoder::Fail(const std::string& why) {
  if (failure_.ok()) failure_ = Status::DataLoss("watch stream: " + why);
  return failure_;
}

Status WatchDecoder::CountHeader(const char* data, size_t size) {
  static constexpr char kEnd[] = "\r\n\r\n";
  for (size_t i = 0; i < size && header_end_matched_ < 4; ++i) {
    if (++header_bytes_ > limits_.max_header_bytes) {
      return Fail("malformed HTTP response: header limit exceeded (" +
                  std::to_string(limits_.max_header_bytes) + " bytes)");
    }
    if (data[i] == kEnd[header_end_matched_]) {
      ++header_end_matched_;
    } else {
      header_end_matched_ = data[i] == '\r' ? 1 : 0;
    }
  }
  return Status::OK();
}

Status WatchDecoder::Feed(const char* data, size_t size, std::vector<WatchEvent>* events) {
  if (!failure_.ok()) return failure_;
  if (parser_.is_done()) return Status::OK();  // bytes after the response mean nothing
  GAPTRAIN_RETURN_IF_ERROR(CountHeader(data, size));
  unparsed_.append(data, size);
  while (!unparsed_.empty() && !parser_.is_done()) {
    // Beast reserves a Content-Length body up front and counts a chunked
    // body against its limit. Re-armed before every put, the limit bounds
    // what a response may declare (a hostile Content-Length is refused, not
    // allocated) without ending a watch that streams forever.
    parser_.body_limit(static_cast<std::uint64_t>(limits_.max_line_bytes) +
                       limits_.max_error_body_bytes + unparsed_.size());
    boost::beast::error_code ec;
    const size_t used = parser_.put(boost::asio::buffer(unparsed_.data(), unparsed_.size()), ec);
    unparsed_.erase(0, used);
    if (ec && ec != http::error::need_more) {
      return Fail("malformed HTTP response: " + ec.message());
    }
    if (parser_.is_header_done()) parser_.eager(true);
    GAPTRAIN_RETURN_IF_ERROR(TakeBody(events));
    if (used == 0) break;  // needs more bytes than we have
  }
  if (parser_.is_done()) unparsed_.clear();
  return Status::OK();
}

Status WatchDecoder::TakeBody(std::vector<WatchEvent>* events) {
  std::string& body = parser_.get().body();
  if (body.empty()) return Status::OK();
  if (http_status() != 200) {
    const size_t room = limits_.max_error_body_bytes - std::min(limits_.max_error_body_bytes,
                                                                 error_body_.size());
    error_body_.append(body, 0, std::min(room, body.size()));
    body.clear();
    return Status::OK();
  }
  size_t start = 0;
  while (start < body.size()) {
    const size_t newline = body.find('\n', start);
    const size_t end = newline == std::string::npos ? body.size() : newline;
    if (line_.size() + (end - start) > limits_.max_line_bytes) {
      return Fail("an event is longer than " + std::to_string(limits_.max_line_bytes) + " bytes");
    }
    line_.append(body, start, end - start);
    if (newline == std::string::npos) break;
    GAPTRAIN_RETURN_IF_ERROR(DecodeLine(line_, events));
    line_.clear();
    start = newline + 1;
  }
  body.clear();
  return Status::OK();
}

Status WatchDecoder::DecodeLine(const std::string& line, std::vector<WatchEvent>* events) {
  if (IsBlank(line)) return Status::OK();
  nlohmann::json json;
  Status s = ParseJson(line, &json);
  if (!s.ok()) return Fail("event '" + Excerpt(line, 80) + "': " + s.message());
  if (!json.is_object()) return Fail("event '" + Excerpt(line, 80) + "' is not a JSON object");
  auto type = json.find("type");
  auto object = json.find("object");
  WatchEvent event;
  if (type == json.end() || !type->is_string() ||
      !ParseType(type->get<std::string>(), &event.type)) {
    return Fail("event '" + Excerpt(line, 80) +
                "': type must be ADDED, MODIFIED, DELETED, BOOKMARK or ERROR");
  }
  if (object == json.end() || !object->is_object()) {
    return Fail("event '" + Excerpt(line, 80) + "': object must be a JSON object");
  }
  event.object = std::move(*object);
  events->push_back(std::move(event));
  return Status::OK();
}

Status WatchDecoder::Finish(std::vector<WatchEvent>* events) {
  if (!failure_.ok()) return failure_;
  if (!header_done()) {
    return Fail(unparsed_.empty() ? "no response" : "the response ended inside its header");
  }
  if (!parser_.is_done()) {
    boost::beast::error_code ec;
    parser_.put_eof(ec);
    if (ec) return Fail("the response ended before its last chunk (truncated)");
    GAPTRAIN_RETURN_IF_ERROR(TakeBody(events));
  }
  if (http_status() == 200 && !IsBlank(line_)) {
    // A complete response whose last line lacks its newline: decode it if
    // it is whole; a cut-off event is an error.
    if (!DecodeLine(line_, events).ok()) {
      failure_ = Status::DataLoss("watch stream: the response ended inside an event");
      return failure_;
    }
  }
  line_.clear();
  return Status::OK();
}

}  // namespace kube
}  // namespace gaptrain
