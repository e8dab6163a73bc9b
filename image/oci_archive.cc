#include "image/oci_archive.h"

#include <set>
#include <utility>

#include "image/sha256.h"

namespace gaptrain {
namespace {

using nlohmann::json;

constexpr char kManifestType[] = "application/vnd.oci.image.manifest.v1+json";
constexpr char kConfigType[] = "application/vnd.oci.image.config.v1+json";
constexpr char kLayerType[] = "application/vnd.oci.image.layer.v1.tar+gzip";
constexpr char kBlobPrefix[] = "blobs/sha256/";
// index.json, manifest.json, oci-layout, a manifest, a config: small.
constexpr uint64_t kMaxJsonBytes = 4 << 20;

Status Invalid(const std::string& where, const std::string& what) {
  return Status::InvalidArgument(where + ": " + what);
}

bool IsHexDigest(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

Status ParseJson(const std::string& text, const std::string& where, json* value) {
  *value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value->is_discarded()) return Invalid(where, "not valid JSON");
  return Status::OK();
}

// The string at obj[key], or "" when it is absent or not a string.
std::string StringAt(const json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_string()) return "";
  return obj[key].get<std::string>();
}

// Passes a source's bytes through, hashing them.
class HashingSource : public ByteSource {
 public:
  explicit HashingSource(ByteSource* inner) : inner_(inner) {}
  Status Read(char* buffer, size_t capacity, size_t* got) override {
    GAPTRAIN_RETURN_IF_ERROR(inner_->Read(buffer, capacity, got));
    sha_.Update(buffer, *got);
    return Status::OK();
  }
  std::string name() const override { return inner_->name(); }
  std::string HexDigest() { return sha_.HexDigest(); }

 private:
  ByteSource* inner_;
  Sha256 sha_;
};

}  // namespace

Status OciArchive::Open(const std::string& path, std::unique_ptr<OciArchive>* archive) {
  std::unique_ptr<OciArchive> a(new OciArchive(path));
  std::map<std::string, std::string> files;
  GAPTRAIN_RETURN_IF_ERROR(a->ReadMembers(&files));
  for (const char* name : {"oci-layout", "index.json", "manifest.json"}) {
    if (files.count(name) == 0) return Invalid(path, std::string("no ") + name);
  }

  json layout;
  GAPTRAIN_RETURN_IF_ERROR(ParseJson(files["oci-layout"], path + ": oci-layout", &layout));
  if (StringAt(layout, "imageLayoutVersion") != "1.0.0") {
    return Invalid(path + ": oci-layout", "imageLayoutVersion is not \"1.0.0\"");
  }

  const std::string at_index = path + ": index.json";
  GAPTRAIN_RETURN_IF_ERROR(ParseJson(files["index.json"], at_index, &a->index_));
  if (!a->index_.is_object() || a->index_.value("schemaVersion", json()) != 2) {
    return Invalid(at_index, "schemaVersion is not 2");
  }
  const json& manifests = a->index_.value("manifests", json());
  if (!manifests.is_array() || manifests.size() != 1) {
    return Invalid(at_index, "manifests must list exactly one image");
  }
  std::string manifest_hex;
  GAPTRAIN_RETURN_IF_ERROR(
      a->CheckDescriptor(manifests[0], at_index + " manifests[0]", kManifestType, &manifest_hex));
  const json& annotations = manifests[0].value("annotations", json());
  for (const char* key : {"io.containerd.image.name", "org.opencontainers.image.ref.name"}) {
    if (StringAt(annotations, key).empty()) {
      return Invalid(at_index + " manifests[0]", std::string("no annotation ") + key);
    }
  }

  Status status;
  const std::string at_manifest = path + ": manifest " + manifest_hex.substr(0, 12);
  const std::string manifest_text = a->ReadBlob(manifest_hex, &status);
  GAPTRAIN_RETURN_IF_ERROR(status);
  GAPTRAIN_RETURN_IF_ERROR(ParseJson(manifest_text, at_manifest, &a->manifest_));
  if (!a->manifest_.is_object() || a->manifest_.value("schemaVersion", json()) != 2) {
    return Invalid(at_manifest, "schemaVersion is not 2");
  }
  if (a->manifest_.contains("mediaType") && StringAt(a->manifest_, "mediaType") != kManifestType) {
    return Invalid(at_manifest, std::string("mediaType is not ") + kManifestType);
  }
  std::string config_hex;
  GAPTRAIN_RETURN_IF_ERROR(a->CheckDescriptor(a->manifest_.value("config", json()),
                                              at_manifest + " config", kConfigType, &config_hex));
  const json& layers = a->manifest_.value("layers", json());
  if (!layers.is_array() || layers.empty()) return Invalid(at_manifest, "no layers");
  std::vector<std::string> layer_hexes;
  for (size_t i = 0; i < layers.size(); ++i) {
    std::string hex;
    GAPTRAIN_RETURN_IF_ERROR(a->CheckDescriptor(
        layers[i], at_manifest + " layers[" + std::to_string(i) + "]", kLayerType, &hex));
    layer_hexes.push_back(hex);
  }

  const std::string at_config = path + ": config " + config_hex.substr(0, 12);
  const std::string config_text = a->ReadBlob(config_hex, &status);
  GAPTRAIN_RETURN_IF_ERROR(status);
  GAPTRAIN_RETURN_IF_ERROR(ParseJson(config_text, at_config, &a->config_));
  if (StringAt(a->config_, "os").empty() || StringAt(a->config_, "architecture").empty()) {
    return Invalid(at_config, "no os or architecture");
  }
  const json& rootfs = a->config_.value("rootfs", json());
  if (StringAt(rootfs, "type") != "layers") return Invalid(at_config, "rootfs.type is not layers");
  const json& diff_ids = rootfs.value("diff_ids", json());
  if (!diff_ids.is_array() || diff_ids.size() != layers.size()) {
    return Invalid(at_config, "rootfs.diff_ids must name one digest per layer (" +
                                  std::to_string(layers.size()) + ")");
  }
  for (const json& id : diff_ids) {
    if (!id.is_string() || id.get<std::string>().rfind("sha256:", 0) != 0 ||
        !IsHexDigest(id.get<std::string>().substr(7))) {
      return Invalid(at_config, "rootfs.diff_ids holds " + id.dump() + ", not sha256:<hex>");
    }
  }

  const std::string at_docker = path + ": manifest.json";
  json docker;
  GAPTRAIN_RETURN_IF_ERROR(ParseJson(files["manifest.json"], at_docker, &docker));
  if (!docker.is_array() || docker.size() != 1 || !docker[0].is_object()) {
    return Invalid(at_docker, "must list exactly one image");
  }
  a->docker_image_ = docker[0];
  if (StringAt(a->docker_image_, "Config") != kBlobPrefix + config_hex) {
    return Invalid(at_docker,
                   std::string("Config is not the manifest's config, ") + kBlobPrefix + config_hex);
  }
  json expected_layers = json::array();
  for (const std::string& hex : layer_hexes) expected_layers.push_back(kBlobPrefix + hex);
  if (a->docker_image_.value("Layers", json()) != expected_layers) {
    return Invalid(at_docker, "Layers are not the manifest's layers in order: " +
                                  expected_layers.dump());
  }
  const json& tags = a->docker_image_.value("RepoTags", json());
  if (!tags.is_array() || tags.empty() || !tags[0].is_string()) {
    return Invalid(at_docker, "no RepoTags");
  }

  std::set<std::string> referenced(layer_hexes.begin(), layer_hexes.end());
  referenced.insert(manifest_hex);
  referenced.insert(config_hex);
  for (const auto& [hex, blob] : a->blobs_) {
    if (referenced.count(hex) == 0) return Invalid(path, kBlobPrefix + hex + " is not referenced");
  }
  *archive = std::move(a);
  return Status::OK();
}

Status OciArchive::ReadMembers(std::map<std::string, std::string>* small_files) {
  return ForEachTarEntry(path_, [this, small_files](const TarEntry& entry, TarReader* tar) {
    const std::string name = NormalizeTarName(entry.name);
    if (entry.type == TarEntry::kDirectory && (name == "blobs" || name == "blobs/sha256")) {
      return Status::OK();
    }
    const bool small = name == "oci-layout" || name == "index.json" || name == "manifest.json";
    const bool blob = name.rfind(kBlobPrefix, 0) == 0;
    if ((!small && !blob) || entry.type != TarEntry::kFile) {
      return Invalid(path_, "unexpected member '" + entry.name + "'");
    }
    if (small) {
      if (small_files->count(name) != 0) return Invalid(path_, name + " appears twice");
      if (entry.size > kMaxJsonBytes) return Invalid(path_, name + " is too large");
      std::string& text = (*small_files)[name];
      return tar->ReadData([&text](const char* data, size_t size) { text.append(data, size); });
    }
    const std::string hex = name.substr(sizeof(kBlobPrefix) - 1);
    if (!IsHexDigest(hex)) {
      return Invalid(path_, "'" + entry.name + "' is not named by a sha256 digest");
    }
    if (blobs_.count(hex) != 0) return Invalid(path_, entry.name + " appears twice");
    Sha256 sha;
    GAPTRAIN_RETURN_IF_ERROR(
        tar->ReadData([&sha](const char* data, size_t size) { sha.Update(data, size); }));
    const std::string actual = sha.HexDigest();
    if (actual != hex) {
      return Status::DataLoss(path_ + ": " + entry.name + " hashes to sha256:" + actual);
    }
    blobs_[hex] = Blob{entry.offset, entry.size};
    return Status::OK();
  });
}

Status OciArchive::CheckDescriptor(const json& descriptor, const std::string& where,
                                   const char* media_type, std::string* hex) const {
  if (!descriptor.is_object()) return Invalid(where, "not a descriptor object");
  if (StringAt(descriptor, "mediaType") != media_type) {
    return Invalid(where, "mediaType is '" + StringAt(descriptor, "mediaType") + "', not " +
                              media_type);
  }
  const std::string digest = StringAt(descriptor, "digest");
  if (digest.rfind("sha256:", 0) != 0 || !IsHexDigest(digest.substr(7))) {
    return Invalid(where, "digest '" + digest + "' is not sha256:<64 hex digits>");
  }
  *hex = digest.substr(7);
  const auto blob = blobs_.find(*hex);
  if (blob == blobs_.end()) return Invalid(where, digest + " has no blob in the archive");
  const json& size = descriptor.value("size", json());
  if (!size.is_number_unsigned() || size.get<uint64_t>() != blob->second.size) {
    return Invalid(where, "size " + size.dump() + " is not the blob's " +
                              std::to_string(blob->second.size) + " bytes");
  }
  return Status::OK();
}

std::string OciArchive::ReadBlob(const std::string& hex, Status* status) const {
  const Blob& blob = blobs_.at(hex);
  if (blob.size > kMaxJsonBytes) {
    *status = Invalid(path_, kBlobPrefix + hex + " is too large for a manifest or config");
    return "";
  }
  std::unique_ptr<FileSource> source;
  *status = FileSource::OpenRange(path_, blob.offset, blob.size, &source);
  std::string bytes(static_cast<size_t>(blob.size), '\0');
  size_t done = 0;
  while (status->ok() && done < bytes.size()) {
    size_t got = 0;
    *status = source->Read(&bytes[done], bytes.size() - done, &got);
    done += got;
  }
  return bytes;
}

uint64_t OciArchive::compressed_layer_bytes() const {
  uint64_t total = 0;
  for (const json& layer : manifest_["layers"]) total += layer["size"].get<uint64_t>();
  return total;
}

Status OciArchive::OpenLayer(size_t i, std::unique_ptr<ByteSource>* compressed) const {
  if (i >= layer_count()) {
    return Status::OutOfRange(path_ + ": no layer " + std::to_string(i) + " (it has " +
                              std::to_string(layer_count()) + ")");
  }
  const Blob& blob = blobs_.at(StringAt(manifest_["layers"][i], "digest").substr(7));
  std::unique_ptr<FileSource> source;
  GAPTRAIN_RETURN_IF_ERROR(FileSource::OpenRange(path_, blob.offset, blob.size, &source));
  *compressed = std::move(source);
  return Status::OK();
}

Status OciArchive::CheckLayer(size_t i, LayerContents* contents) const {
  *contents = LayerContents();
  std::unique_ptr<ByteSource> compressed;
  GAPTRAIN_RETURN_IF_ERROR(OpenLayer(i, &compressed));
  std::unique_ptr<GzipSource> gzip;
  GAPTRAIN_RETURN_IF_ERROR(GzipSource::Open(compressed.get(), &gzip));
  HashingSource hashing(gzip.get());
  TarReader tar(&hashing);
  const std::string where = path_ + ": layer " + std::to_string(i);
  std::set<std::string> seen;
  for (;;) {
    TarEntry entry;
    bool end = false;
    GAPTRAIN_RETURN_IF_ERROR(tar.Next(&entry, &end));
    if (end) break;
    const std::string name = NormalizeTarName(entry.name);
    const std::string at = where + " entry '" + entry.name + "'";
    if (!name.empty() && name[0] == '/') return Invalid(at, "an absolute path");
    if (("/" + name + "/").find("/../") != std::string::npos) {
      return Invalid(at, "a path through '..'");
    }
    const std::string base = name.substr(name.rfind('/') + 1);
    if (base.rfind(".wh.", 0) == 0) return Invalid(at, "a whiteout");
    if (entry.type == TarEntry::kCharDevice || entry.type == TarEntry::kBlockDevice) {
      return Invalid(at, "a device node");
    }
    if (entry.type == TarEntry::kHardLink && seen.count(NormalizeTarName(entry.link_name)) == 0) {
      return Invalid(at, "a hard link to '" + entry.link_name + "', no earlier entry");
    }
    if (!seen.insert(name).second) return Invalid(at, "a second entry of that name");
    if (entry.type == TarEntry::kFile) contents->file_bytes += entry.size;
    contents->entries.push_back(std::move(entry));
  }
  // What follows the end-of-archive blocks counts in the digest too.
  char rest[64 * 1024];
  for (size_t got = 1; got > 0;) GAPTRAIN_RETURN_IF_ERROR(hashing.Read(rest, sizeof rest, &got));
  const std::string digest = "sha256:" + hashing.HexDigest();
  const std::string diff_id = config_["rootfs"]["diff_ids"][i].get<std::string>();
  if (digest != diff_id) {
    return Status::DataLoss(where + " unpacks to " + digest + ", the config's diff_id is " +
                            diff_id);
  }
  return Status::OK();
}

}  // namespace gaptrain
