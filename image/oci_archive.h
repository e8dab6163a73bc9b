// OciArchive: an image archive as image/assemble.sh writes it (and `docker
// save` since Docker 25): one tar that is an OCI image layout (oci-layout,
// index.json, blobs/sha256/...) and a docker-archive (manifest.json naming
// the same blobs), holding one image. Open() checks it the way the loaders
// read it, so a test can tell that docker, podman, containerd and kind will
// take it; CheckLayer() checks a layer's contents.
//
// Open() reads the archive once and requires:
//   - members oci-layout, index.json, manifest.json and blobs/sha256/<64
//     lowercase hex> (and the blobs/ directories), each once, nothing else;
//   - every blob's SHA-256 is its name, and every blob is referenced;
//   - oci-layout: imageLayoutVersion 1.0.0;
//   - index.json: schemaVersion 2, exactly one OCI image manifest, named by
//     the annotations io.containerd.image.name (containerd, kind) and
//     org.opencontainers.image.ref.name;
//   - the manifest: schemaVersion 2, an OCI image config and gzip layers,
//     each descriptor naming a blob of its size;
//   - the config: os, architecture, and a rootfs of type "layers" with a
//     diff_id per layer;
//   - manifest.json: one image whose Config and Layers are the manifest's
//     config and layers (blobs/sha256/<hex>, in order), with a RepoTag.
// Errors: DATA_LOSS for bytes that do not match their digest or a damaged
// tar, INVALID_ARGUMENT for anything else, naming the member and the field.

#ifndef GAPTRAIN_IMAGE_OCI_ARCHIVE_H_
#define GAPTRAIN_IMAGE_OCI_ARCHIVE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "image/byte_source.h"
#include "image/tar_reader.h"
#include "services/base/status.h"

namespace gaptrain {

// What a layer holds, from CheckLayer.
struct LayerContents {
  std::vector<TarEntry> entries;  // in archive order
  uint64_t file_bytes = 0;        // the regular files' sizes: the space it takes unpacked
};

class OciArchive {
 public:
  static Status Open(const std::string& path, std::unique_ptr<OciArchive>* archive);

  const std::string& path() const { return path_; }
  const nlohmann::json& index() const { return index_; }
  const nlohmann::json& manifest() const { return manifest_; }
  const nlohmann::json& config() const { return config_; }
  // manifest.json's one image: {"Config": ..., "RepoTags": [...], "Layers": [...]}.
  const nlohmann::json& docker_image() const { return docker_image_; }

  size_t layer_count() const { return manifest_["layers"].size(); }
  // The layers' gzip sizes, summed: what a loader transfers.
  uint64_t compressed_layer_bytes() const;

  // The gzip bytes of layer `i` (0 = the bottom one), where they lie in the
  // archive.
  Status OpenLayer(size_t i, std::unique_ptr<ByteSource>* compressed) const;

  // Inflates layer `i` and checks that its SHA-256 is the config's diff_id
  // and that every entry unpacks the same everywhere: a relative path
  // without "..", no whiteout (".wh."), no device node (the runtime
  // provides /dev), no name twice, hard links only to an earlier entry.
  Status CheckLayer(size_t i, LayerContents* contents) const;

 private:
  struct Blob {
    uint64_t offset = 0;
    uint64_t size = 0;
  };

  explicit OciArchive(std::string path) : path_(std::move(path)) {}
  Status ReadMembers(std::map<std::string, std::string>* small_files);
  Status CheckDescriptor(const nlohmann::json& descriptor, const std::string& where,
                         const char* media_type, std::string* hex) const;
  std::string ReadBlob(const std::string& hex, Status* status) const;

  std::string path_;
  std::map<std::string, Blob> blobs_;  // by hex digest
  nlohmann::json index_;
  nlohmann::json manifest_;
  nlohmann::json config_;
  nlohmann::json docker_image_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_IMAGE_OCI_ARCHIVE_H_
