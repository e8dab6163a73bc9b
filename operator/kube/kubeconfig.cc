#include "operator/kube/kubeconfig.h"

#include <yaml-cpp/yaml.h>

#include <exception>
#include <map>
#include <set>
#include <utility>

#include "operator/kube/pem.h"
#include "services/api/yaml_fields.h"
#include "services/base/file_contents.h"
#include "services/base/file_paths.h"

namespace gaptrain {
namespace kube {
namespace {

// One named cluster, user or context, and where it was defined.
struct Entry {
  YAML::Node body;    // the "cluster:", "user:" or "context:" mapping
  std::string file;   // the kubeconfig holding it
  std::string field;  // "users[0].user"
};

struct Merged {
  std::map<std::string, Entry> clusters, users, contexts;
  std::string current_context;
};

class Loader {
 public:
  explicit Loader(const std::vector<std::string>& files) {
    for (const std::string& f : files) files_text_ += (files_text_.empty() ? "" : ":") + f;
  }

  Status ReadFile(const std::string& file);
  Status Build(const std::string& context, ClusterConfig* out);

 private:
  Status ReadCluster(const Entry& cluster, ClusterConfig* config);
  Status ReadUser(const Entry& user, ClusterConfig* config);
  // Reads "<key>-data" (base64) or else "<key>" (a file) into *pem and
  // checks it with `check`. Sets *field to the one used ("" if neither).
  Status ReadPem(YamlFields* fields, const Entry& entry, const std::string& key,
                 Status (*check)(const std::string&), std::string* pem, std::string* field);
  // "kubeconfig FILE: why" with the code of `s`.
  static Status InFile(const std::string& file, const Status& s) {
    return Status(s.code(), "kubeconfig " + file + ": " + s.message());
  }
  static std::string Names(const std::map<std::string, Entry>& entries);

  std::string files_text_;
  Merged merged_;
};

std::string ResolvePath(const std::string& kubeconfig, const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  return DirName(kubeconfig) + "/" + path;
}

Status Loader::ReadFile(const std::string& file) {
  std::string text;
  Status s = gaptrain::ReadFile(file, &text);
  if (!s.ok()) return Status(s.code(), "kubeconfig " + s.message());
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const std::exception& e) {
    return InFile(file, Status::InvalidArgument(std::string("not valid YAML: ") + e.what()));
  }
  if (!root || root.IsNull()) return Status::OK();  // an empty file adds nothing
  if (!root.IsMap()) return InFile(file, Status::InvalidArgument("must be a YAML mapping"));

  s = Status::OK();
  YamlFields top(root, "", &s);
  std::string current;
  top.Read("current-context", &current);
  if (merged_.current_context.empty()) merged_.current_context = current;
  const std::pair<const char*, std::map<std::string, Entry>*> sections[] = {
      {"clusters", &merged_.clusters}, {"users", &merged_.users}, {"contexts", &merged_.contexts}};
  for (const auto& section : sections) {
    // "clusters" holds items with a "cluster" mapping, and so on.
    const std::string key = section.first;
    const std::string inner = key.substr(0, key.size() - 1);
    std::map<std::string, Entry>* entries = section.second;
    top.ReadEach(key, [&](const YAML::Node& node, const std::string& path) {
      YamlFields item(node, path, &s);
      std::string name;
      item.Read("name", &name);
      if (s.ok() && name.empty()) item.Fail(item.PathOf("name"), "is required");
      YAML::Node body = item.Map(inner);
      if (s.ok() && entries->count(name) == 0) {
        entries->emplace(name, Entry{body, file, item.PathOf(inner)});
      }
    });
  }
  return s.ok() ? Status::OK() : InFile(file, s);
}

std::string Loader::Names(const std::map<std::string, Entry>& entries) {
  if (entries.empty()) return "none defined";
  std::string out;
  for (const auto& e : entries) out += (out.empty() ? "" : ", ") + e.first;
  return out;
}

Status Loader::ReadPem(YamlFields* fields, const Entry& entry, const std::string& key,
                       Status (*check)(const std::string&), std::string* pem,
                       std::string* field) {
  std::string data, file;
  fields->Read(key + "-data", &data);
  fields->Read(key, &file);
  field->clear();
  if (!data.empty()) {
    *field = fields->PathOf(key + "-data");
    if (!DecodeBase64(data, pem)) {
      return InFile(entry.file, Status::InvalidArgument(*field + ": not valid base64"));
    }
  } else if (!file.empty()) {
    *field = fields->PathOf(key);
    Status s = gaptrain::ReadFile(ResolvePath(entry.file, file), pem);
    if (!s.ok()) return InFile(entry.file, Status(s.code(), *field + ": " + s.message()));
  } else {
    return Status::OK();
  }
  Status s = check(*pem);
  if (!s.ok()) return InFile(entry.file, Status::InvalidArgument(*field + ": " + s.message()));
  return Status::OK();
}

Status Loader::ReadCluster(const Entry& cluster, ClusterConfig* config) {
  Status s;
  YamlFields fields(cluster.body, cluster.field, &s);
  fields.Read("server", &config->server);
  fields.Read("insecure-skip-tls-verify", &config->insecure_skip_tls_verify);
  fields.Read("tls-server-name", &config->tls_server_name);
  std::string proxy;
  fields.Read("proxy-url", &proxy);
  if (!s.ok()) return InFile(cluster.file, s);
  if (!proxy.empty()) {
    return InFile(cluster.file, Status::InvalidArgument(fields.PathOf("proxy-url") +
                                                        ": proxies are not supported"));
  }
  if (config->server.empty()) {
    return InFile(cluster.file, Status::InvalidArgument(fields.PathOf("server") + ": is required"));
  }
  ServerUrl url;
  Status url_status = ParseServerUrl(config->server, &url);
  if (!url_status.ok()) {
    return InFile(cluster.file, Status::InvalidArgument(fields.PathOf("server") + ": " +
                                                        url_status.message()));
  }
  std::string ca_field;
  GAPTRAIN_RETURN_IF_ERROR(ReadPem(&fields, cluster, "certificate-authority",
                                   &CheckCertificatesPem, &config->ca_pem, &ca_field));
  if (!s.ok()) return InFile(cluster.file, s);
  if (config->insecure_skip_tls_verify && !ca_field.empty()) {
    // kubectl refuses this combination too: one of the two is a mistake.
    return InFile(cluster.file,
                  Status::InvalidArgument(fields.PathOf("insecure-skip-tls-verify") +
                                          ": cannot be combined with " + ca_field));
  }
  return Status::OK();
}

Status Loader::ReadUser(const Entry& user, ClusterConfig* config) {
  Status s;
  YamlFields fields(user.body, user.field, &s);
  if (user.body && user.body.IsMap()) {
    const std::pair<const char*, const char*> unsupported[] = {
        {"exec", "exec credential plugins are not supported; use a token, tokenFile or client "
                 "certificate"},
        {"auth-provider", "auth providers are not supported; use a token, tokenFile or client "
                          "certificate"},
        {"username", "basic authentication is not supported"},
        {"password", "basic authentication is not supported"},
        {"as", "impersonation is not supported"},
        {"as-uid", "impersonation is not supported"},
        {"as-groups", "impersonation is not supported"},
        {"as-user-extra", "impersonation is not supported"},
    };
    for (const auto& [key, why] : unsupported) {
      const YAML::Node n = user.body[key];
      if (n && !n.IsNull()) {
        return InFile(user.file, Status::InvalidArgument(fields.PathOf(key) + ": " + why));
      }
    }
  }
  fields.Read("token", &config->token);
  std::string token_file;
  fields.Read("tokenFile", &token_file);
  if (!s.ok()) return InFile(user.file, s);
  if (!token_file.empty()) {
    config->token_file = ResolvePath(user.file, token_file);
    std::string ignored;
    Status read = gaptrain::ReadFile(config->token_file, &ignored);
    if (!read.ok()) {
      return InFile(user.file,
                    Status(read.code(), fields.PathOf("tokenFile") + ": " + read.message()));
    }
  }
  std::string cert_field, key_field;
  GAPTRAIN_RETURN_IF_ERROR(ReadPem(&fields, user, "client-certificate", &CheckCertificatesPem,
                                   &config->client_certificate_pem, &cert_field));
  GAPTRAIN_RETURN_IF_ERROR(ReadPem(&fields, user, "client-key", &CheckPrivateKeyPem,
                                   &config->client_key_pem, &key_field));
  if (!s.ok()) return InFile(user.file, s);
  if (cert_field.empty() != key_field.empty()) {
    const std::string given = cert_field.empty() ? key_field : cert_field;
    return InFile(user.file, Status::InvalidArgument(
                                 given + ": a client certificate needs both " +
                                 fields.PathOf("client-certificate(-data)") + " and " +
                                 fields.PathOf("client-key(-data)")));
  }
  return Status::OK();
}

Status Loader::Build(const std::string& context, ClusterConfig* out) {
  const std::string name = context.empty() ? merged_.current_context : context;
  if (name.empty()) {
    return Status::InvalidArgument("kubeconfig " + files_text_ +
                                   ": current-context is not set and no context was given "
                                   "(contexts: " + Names(merged_.contexts) + ")");
  }
  auto ctx = merged_.contexts.find(name);
  if (ctx == merged_.contexts.end()) {
    return Status::NotFound("kubeconfig " + files_text_ + ": context \"" + name +
                            "\" not found (contexts: " + Names(merged_.contexts) + ")");
  }
  Status s;
  YamlFields fields(ctx->second.body, ctx->second.field, &s);
  std::string cluster_name, user_name, ns;
  fields.Read("cluster", &cluster_name);
  fields.Read("user", &user_name);
  fields.Read("namespace", &ns);
  if (!s.ok()) return InFile(ctx->second.file, s);
  if (cluster_name.empty()) {
    return InFile(ctx->second.file,
                  Status::InvalidArgument(fields.PathOf("cluster") + ": is required"));
  }
  auto cluster = merged_.clusters.find(cluster_name);
  if (cluster == merged_.clusters.end()) {
    return InFile(ctx->second.file,
                  Status::NotFound(fields.PathOf("cluster") + ": cluster \"" + cluster_name +
                                   "\" not found (clusters: " + Names(merged_.clusters) + ")"));
  }
  ClusterConfig config;
  GAPTRAIN_RETURN_IF_ERROR(ReadCluster(cluster->second, &config));
  if (!user_name.empty()) {
    auto user = merged_.users.find(user_name);
    if (user == merged_.users.end()) {
      return InFile(ctx->second.file,
                    Status::NotFound(fields.PathOf("user") + ": user \"" + user_name +
                                     "\" not found (users: " + Names(merged_.users) + ")"));
    }
    GAPTRAIN_RETURN_IF_ERROR(ReadUser(user->second, &config));
  }
  if (!ns.empty()) config.default_namespace = ns;
  config.source = "kubeconfig " + files_text_ + ", context " + name;
  *out = std::move(config);
  return Status::OK();
}

int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

bool DecodeBase64(const std::string& text, std::string* out) {
  std::string compact;
  for (char c : text) {
    if (c != '\n' && c != '\r') compact += c;
  }
  if (compact.size() % 4 != 0) return false;
  std::string decoded;
  for (size_t i = 0; i < compact.size(); i += 4) {
    const bool last = i + 4 == compact.size();
    int values[4];
    int padding = 0;
    for (int j = 0; j < 4; ++j) {
      const char c = compact[i + j];
      if (c == '=') {
        // Only the last one or two characters of the text may be padding.
        if (!last || j < 2) return false;
        ++padding;
        values[j] = 0;
        continue;
      }
      if (padding > 0) return false;
      values[j] = Base64Value(c);
      if (values[j] < 0) return false;
    }
    const uint32_t bits = (values[0] << 18) | (values[1] << 12) | (values[2] << 6) | values[3];
    decoded += static_cast<char>((bits >> 16) & 0xff);
    if (padding < 2) decoded += static_cast<char>((bits >> 8) & 0xff);
    if (padding < 1) decoded += static_cast<char>(bits & 0xff);
  }
  *out = std::move(decoded);
  return true;
}

std::vector<std::string> SplitKubeconfigList(const std::string& list) {
  std::vector<std::string> files;
  std::set<std::string> seen;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(':', start);
    if (end == std::string::npos) end = list.size();
    std::string file = list.substr(start, end - start);
    if (!file.empty() && seen.insert(file).second) files.push_back(file);
    start = end + 1;
  }
  return files;
}

Status LoadKubeconfig(const std::vector<std::string>& files, const std::string& context,
                      ClusterConfig* out) {
  if (files.empty()) return Status::InvalidArgument("kubeconfig: no file given");
  Loader loader(files);
  for (const std::string& file : files) GAPTRAIN_RETURN_IF_ERROR(loader.ReadFile(file));
  return loader.Build(context, out);
}

}  // namespace kube
}  // namespace gaptrain
