// The coordinator's state file: one CoordinatorSnapshot (proto/gaptrain.proto)
// framed and checksummed, replaced atomically (temp file, fsync, rename,
// directory fsync: services/base/atomic_file.h's WriteFileAtomically), so
// the file always holds one whole snapshot, the old or the new.
//
// Format, little-endian:
//   0    8  magic "GTCOORD1"
//   8    4  payload length L, uint32, at most 64 MiB
//   12   4  CRC-32 (zlib) of the payload
//   16   L  payload: the snapshot in protobuf binary form
//
// A reader hands nothing out unless the length and CRC match and the
// payload parses: a torn, corrupt or foreign file is DATA_LOSS naming the
// path and the problem; a missing file NOT_FOUND.

#ifndef GAPTRAIN_SERVICES_COORDINATOR_STATE_FILE_H_
#define GAPTRAIN_SERVICES_COORDINATOR_STATE_FILE_H_

#include <string>

#include "proto/gaptrain.pb.h"
#include "services/base/status.h"

namespace gaptrain {

// The file's name inside --state-dir.
extern const char kStateFileName[];

Status WriteStateFile(const std::string& path, const proto::CoordinatorSnapshot& snapshot);
Status ReadStateFile(const std::string& path, proto::CoordinatorSnapshot* snapshot);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COORDINATOR_STATE_FILE_H_
