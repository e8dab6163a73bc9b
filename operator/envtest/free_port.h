// FreePort: a TCP port nothing listens on now, for a component a test
// starts (etcd, kube-apiserver, Kueue's servers).
//
// What callers may rely on: the port was free when this returned; another
// process may take it before the component binds it, and the component
// then fails with a log that says so.

#ifndef GAPTRAIN_OPERATOR_ENVTEST_FREE_PORT_H_
#define GAPTRAIN_OPERATOR_ENVTEST_FREE_PORT_H_

#include <cstdint>

#include "services/base/status.h"

namespace gaptrain {
namespace envtest {

// Free on 127.0.0.1, or on every interface when `every_interface`.
Status FreePort(bool every_interface, uint16_t* port);

}  // namespace envtest
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_ENVTEST_FREE_PORT_H_
