#include "services/net/channel_renewal.h"

namespace gaptrain {

bool ChannelRenewal::Renew(const Status& outcome, Clock::time_point now) {
  switch (outcome.code()) {
    case Status::Code::kUnavailable:
    case Status::Code::kDeadlineExceeded:
      break;
    case Status::Code::kCancelled:
      return false;
    default:  // the server answered
      failing_since_.reset();
      return false;
  }
  if (!failing_since_) {
    failing_since_ = now;
    return false;
  }
  if (now - *failing_since_ < interval_) return false;
  failing_since_ = now;  // the next renewal, if still failing, an interval later
  return true;
}

}  // namespace gaptrain
