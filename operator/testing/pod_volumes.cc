#include "operator/testing/pod_volumes.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>

#include "operator/testing/json_fields.h"
#include "services/base/os_error.h"

namespace gaptrain {
namespace kube_testing {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// A relative path without ".." components (item paths, subPath).
bool IsSafeRelativePath(const std::string& path) {
  if (path.empty() || path[0] == '/') return false;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t end = std::min(path.find('/', start), path.size());
    if (path.compare(start, end - start, "..") == 0) return false;
    start = end + 1;
  }
  return true;
}

Status WriteFile(const std::string& path, const std::string& bytes, int mode) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return OsError(path, "create directories", ec.value());
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
    if (!out) return OsError(path, "write", errno);
  }
  if (chmod(path.c_str(), static_cast<mode_t>(mode)) != 0) return OsError(path, "chmod", errno);
  return Status::OK();
}

Status FreshDirectory(const std::string& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) return OsError(dir, "create directories", ec.value());
  return Status::OK();
}

// Writes a secret's or config map's keys into `dir`.
Status Project(const json& volume_source, const json* object, bool is_secret,
               const std::string& field, int default_mode, const std::string& dir) {
  if (object == nullptr) return Status::OK();  // optional and absent: empty
  std::map<std::string, std::string> data;
  GAPTRAIN_RETURN_IF_ERROR(DecodeConfigData(*object, is_secret, &data));
  const json items = ListField(volume_source, {"items"});
  const std::string object_name = std::string(is_secret ? "Secret " : "ConfigMap ") +
                                  StringField(*object, {"metadata", "namespace"}) + "/" +
                                  StringField(*object, {"metadata", "name"});
  if (items.empty()) {
    for (const auto& [key, bytes] : data) {
      if (!IsSafeRelativePath(key)) continue;
      GAPTRAIN_RETURN_IF_ERROR(WriteFile(dir + "/" + key, bytes, default_mode));
    }
    return Status::OK();
  }
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string item_field = field + ".items[" + std::to_string(i) + "]";
    const std::string key = StringField(items[i], {"key"});
    const std::string path = StringField(items[i], {"path"});
    if (!IsSafeRelativePath(path)) {
      return Status::InvalidArgument(item_field + ".path: Invalid value: \"" + path +
                                     "\": must be a relative path without '..'");
    }
    auto it = data.find(key);
    if (it == data.end()) {
      if (BoolField(volume_source, {"optional"})) continue;
      return Status::NotFound("couldn't find key " + key + " in " + object_name);
    }
    const int mode = static_cast<int>(IntField(items[i], {"mode"}, default_mode));
    GAPTRAIN_RETURN_IF_ERROR(WriteFile(dir + "/" + path, it->second, mode));
  }
  return Status::OK();
}

// A downwardAPI item's value: labels and annotations as the kubelet
// writes them, one key="value" per line.
Status FieldValue(const json& pod, const std::string& field_path, const std::string& field,
                  std::string* out) {
  if (field_path == "metadata.name" || field_path == "metadata.namespace" ||
      field_path == "metadata.uid") {
    *out = StringField(pod, {"metadata", field_path.substr(9)});
    return Status::OK();
  }
  if (field_path == "metadata.labels" || field_path == "metadata.annotations") {
    out->clear();
    const json* map = FindField(pod, {"metadata", field_path.substr(9)});
    if (map == nullptr || !map->is_object()) return Status::OK();
    for (const auto& [key, value] : map->items()) {
      *out += key + "=" + json(value.is_string() ? value.get<std::string>() : "").dump() + "\n";
    }
    return Status::OK();
  }
  return Status::InvalidArgument(field + ".fieldRef.fieldPath: Unsupported value: \"" +
                                 field_path + "\" (the test node knows metadata.name, "
                                 ".namespace, .uid, .labels, .annotations)");
}

// A projected volume's sources, written into `dir`.
Status ProjectSources(const json& pod, const json& projected, const ClusterSnapshot& snapshot,
                      const TokenSource& tokens, const std::string& field,
                      const std::string& dir) {
  const std::string ns = StringField(pod, {"metadata", "namespace"});
  const int default_mode = static_cast<int>(IntField(projected, {"defaultMode"}, 0644));
  const json sources = ListField(projected, {"sources"});
  for (size_t i = 0; i < sources.size(); ++i) {
    const json& source = sources[i];
    const std::string at = field + ".sources[" + std::to_string(i) + "]";
    const json* secret = FindField(source, {"secret"});
    const json* config = FindField(source, {"configMap"});
    if (secret != nullptr || config != nullptr) {
      const bool is_secret = secret != nullptr;
      const json& from = is_secret ? *secret : *config;
      const std::string name = StringField(from, {"name"});
      const json* object = snapshot.Find(is_secret ? "secrets" : "configmaps", ns, name);
      if (object == nullptr && !BoolField(from, {"optional"})) {
        return Status::NotFound(std::string(is_secret ? "secret" : "configmap") + " \"" + name +
                                "\" not found");
      }
      GAPTRAIN_RETURN_IF_ERROR(Project(from, object, is_secret,
                                       at + (is_secret ? ".secret" : ".configMap"),
                                       default_mode, dir));
    } else if (const json* downward = FindField(source, {"downwardAPI"})) {
      const json items = ListField(*downward, {"items"});
      for (size_t j = 0; j < items.size(); ++j) {
        const std::string item = at + ".downwardAPI.items[" + std::to_string(j) + "]";
        const std::string path = StringField(items[j], {"path"});
        if (!IsSafeRelativePath(path)) {
          return Status::InvalidArgument(item + ".path: must be a relative path without '..'");
        }
        std::string value;
        GAPTRAIN_RETURN_IF_ERROR(
            FieldValue(pod, StringField(items[j], {"fieldRef", "fieldPath"}), item, &value));
        const int mode = static_cast<int>(IntField(items[j], {"mode"}, default_mode));
        GAPTRAIN_RETURN_IF_ERROR(WriteFile(dir + "/" + path, value, mode));
      }
    } else if (const json* token = FindField(source, {"serviceAccountToken"})) {
      const std::string path = StringField(*token, {"path"});
      if (!IsSafeRelativePath(path)) {
        return Status::InvalidArgument(at + ".serviceAccountToken.path: must be a relative "
                                       "path without '..'");
      }
      if (!tokens) {
        return Status::FailedPrecondition(at + ".serviceAccountToken: no token source");
      }
      std::string value;
      GAPTRAIN_RETURN_IF_ERROR(tokens(pod, StringField(*token, {"audience"}),
                                      IntField(*token, {"expirationSeconds"}, 3600), &value));
      // The kubelet writes tokens owner-readable only (0600 by default).
      GAPTRAIN_RETURN_IF_ERROR(WriteFile(dir + "/" + path, value, 0600));
    } else {
      return Status::InvalidArgument(at + ": a projection the test node does not support (it "
                                     "knows secret, configMap, downwardAPI, "
                                     "serviceAccountToken)");
    }
  }
  return Status::OK();
}

struct Volume {
  std::string host_path;
  bool read_only = false;
  bool may_create_sub_paths = true;
};

// Makes volume `index` of the pod and says where it is on the host.
Status MakeVolume(const json& pod, const json& volume, size_t index,
                  const ClusterSnapshot& snapshot, const std::string& pod_dir,
                  const std::string& claims_dir, const TokenSource& tokens, Volume* out) {
  const std::string ns = StringField(pod, {"metadata", "namespace"});
  const std::string name = StringField(volume, {"name"});
  const std::string field = "spec.volumes[" + std::to_string(index) + "]";
  const std::string dir = pod_dir + "/volumes/" + name;
  const json* secret = FindField(volume, {"secret"});
  const json* config = FindField(volume, {"configMap"});
  if (secret != nullptr || config != nullptr) {
    const bool is_secret = secret != nullptr;
    const json& source = is_secret ? *secret : *config;
    const std::string object_name = StringField(source, {is_secret ? "secretName" : "name"});
    const json* object = snapshot.Find(is_secret ? "secrets" : "configmaps", ns, object_name);
    if (object == nullptr && !BoolField(source, {"optional"})) {
      return Status::NotFound(std::string(is_secret ? "secret" : "configmap") + " \"" +
                              object_name + "\" not found");
    }
    GAPTRAIN_RETURN_IF_ERROR(FreshDirectory(dir));
    GAPTRAIN_RETURN_IF_ERROR(Project(source, object, is_secret,
                                     field + (is_secret ? ".secret" : ".configMap"),
                                     static_cast<int>(IntField(source, {"defaultMode"}, 0644)),
                                     dir));
    *out = {dir, true, false};
  } else if (const json* projected = FindField(volume, {"projected"})) {
    GAPTRAIN_RETURN_IF_ERROR(FreshDirectory(dir));
    GAPTRAIN_RETURN_IF_ERROR(
        ProjectSources(pod, *projected, snapshot, tokens, field + ".projected", dir));
    *out = {dir, true, false};
  } else if (const json* claim_ref = FindField(volume, {"persistentVolumeClaim"})) {
    const std::string claim_name = StringField(*claim_ref, {"claimName"});
    const json* claim = snapshot.Find("persistentvolumeclaims", ns, claim_name);
    if (claim == nullptr) {
      return Status::NotFound("persistentvolumeclaim \"" + claim_name + "\" not found");
    }
    if (StringField(*claim, {"status", "phase"}) != "Bound") {
      return Status::Unavailable("persistentvolumeclaim \"" + claim_name + "\" is not bound");
    }
    const std::string claim_dir = ClaimDirectory(claims_dir, *claim);
    std::error_code ec;
    fs::create_directories(claim_dir, ec);
    if (ec) return OsError(claim_dir, "create directories", ec.value());
    *out = {claim_dir, BoolField(*claim_ref, {"readOnly"}), true};
  } else if (FindField(volume, {"emptyDir"}) != nullptr) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return OsError(dir, "create directories", ec.value());
    *out = {dir, false, true};
  } else if (const json* host = FindField(volume, {"hostPath"})) {
    const std::string path = StringField(*host, {"path"});
    const std::string type = StringField(*host, {"type"});
    if (path.empty() || path[0] != '/') {
      return Status::InvalidArgument(field + ".hostPath.path: must be an absolute path");
    }
    std::error_code ec;
    if (type == "DirectoryOrCreate") {
      fs::create_directories(path, ec);
      if (ec) return OsError(path, "create directories", ec.value());
    } else if (type == "FileOrCreate" && !fs::exists(path, ec)) {
      GAPTRAIN_RETURN_IF_ERROR(WriteFile(path, "", 0644));
    }
    if ((type == "Directory" || type == "DirectoryOrCreate") && !fs::is_directory(path, ec)) {
      return Status::NotFound(field + ".hostPath: " + path + " is not a directory");
    }
    if ((type == "File" || type == "FileOrCreate") && !fs::is_regular_file(path, ec)) {
      return Status::NotFound(field + ".hostPath: " + path + " is not a file");
    }
    if (!type.empty() && type != "Directory" && type != "DirectoryOrCreate" && type != "File" &&
        type != "FileOrCreate") {
      return Status::InvalidArgument(field + ".hostPath.type: Unsupported value: \"" + type +
                                     "\" (the test node knows \"\", Directory, "
                                     "DirectoryOrCreate, File, FileOrCreate)");
    }
    if (!fs::exists(path, ec)) return Status::NotFound(field + ".hostPath: " + path + " is missing");
    *out = {path, false, true};
  } else {
    return Status::InvalidArgument(field + ": volume \"" + name +
                                   "\" has a type the test node does not support (it knows "
                                   "secret, configMap, projected, persistentVolumeClaim, "
                                   "emptyDir, hostPath)");
  }
  return Status::OK();
}

size_t Depth(const std::string& path) { return std::count(path.begin(), path.end(), '/'); }

}  // namespace

std::string ClaimDirectory(const std::string& claims_dir, const json& claim) {
  return claims_dir + "/" + StringField(claim, {"metadata", "namespace"}) + "/" +
         StringField(claim, {"metadata", "name"}) + "-" + StringField(claim, {"metadata", "uid"});
}

Status PreparePodVolumes(const json& pod, const json& container, const ClusterSnapshot& snapshot,
                         const std::string& pod_dir, const std::string& claims_dir,
                         const TokenSource& tokens, std::vector<BindMount>* mounts) {
  const json volumes = ListField(pod, {"spec", "volumes"});
  std::map<std::string, Volume> made;
  const json volume_mounts = ListField(container, {"volumeMounts"});
  std::vector<std::string> paths;
  mounts->clear();
  for (size_t i = 0; i < volume_mounts.size(); ++i) {
    const json& mount = volume_mounts[i];
    const std::string field = "volumeMounts[" + std::to_string(i) + "]";
    const std::string name = StringField(mount, {"name"});
    const std::string path = StringField(mount, {"mountPath"});
    if (path.empty() || path[0] != '/' || path == "/" || !IsSafeRelativePath(path.substr(1))) {
      return Status::InvalidArgument(field + ".mountPath: Invalid value: \"" + path +
                                     "\": must be an absolute path other than / without '..'");
    }
    if (std::find(paths.begin(), paths.end(), path) != paths.end()) {
      return Status::InvalidArgument(field + ".mountPath: Invalid value: \"" + path +
                                     "\": must be unique");
    }
    paths.push_back(path);
    if (FindField(mount, {"subPathExpr"}) != nullptr) {
      return Status::InvalidArgument(field + ".subPathExpr: not supported by the test node");
    }
    auto volume = made.find(name);
    if (volume == made.end()) {
      size_t index = 0;
      while (index < volumes.size() && StringField(volumes[index], {"name"}) != name) ++index;
      if (index == volumes.size()) {
        return Status::InvalidArgument(field + ".name: Not found: \"" + name + "\"");
      }
      Volume v;
      GAPTRAIN_RETURN_IF_ERROR(
          MakeVolume(pod, volumes[index], index, snapshot, pod_dir, claims_dir, tokens, &v));
      volume = made.emplace(name, v).first;
    }
    BindMount bind{volume->second.host_path, path,
                   volume->second.read_only || BoolField(mount, {"readOnly"})};
    const std::string sub_path = StringField(mount, {"subPath"});
    if (!sub_path.empty()) {
      if (!IsSafeRelativePath(sub_path)) {
        return Status::InvalidArgument(field + ".subPath: Invalid value: \"" + sub_path +
                                       "\": must be a relative path without '..'");
      }
      bind.source += "/" + sub_path;
      std::error_code ec;
      if (!fs::exists(bind.source, ec)) {
        if (!volume->second.may_create_sub_paths) {
          return Status::NotFound(field + ".subPath: " + sub_path + " is not in volume " + name);
        }
        fs::create_directories(bind.source, ec);
        if (ec) return OsError(bind.source, "create directories", ec.value());
      }
    }
    mounts->push_back(bind);
  }
  std::stable_sort(mounts->begin(), mounts->end(), [](const BindMount& a, const BindMount& b) {
    return Depth(a.target) < Depth(b.target);
  });
  return Status::OK();
}

}  // namespace kube_testing
}  // namespace gaptrain
