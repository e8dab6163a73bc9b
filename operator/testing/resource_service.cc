#include "operator/testing/resource_service.h"

#include <utility>
#include <vector>

#include "operator/testing/crd_definition.h"
#include "operator/testing/kind_rules.h"
#include "operator/testing/managed_fields.h"
#include "operator/testing/table_view.h"
#include "operator/testing/yaml_to_json.h"
#include "operator/testing/json_fields.h"

namespace gaptrain {
namespace kube_testing {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

const char kMergePatch[] = "application/merge-patch+json";
const char kJsonPatch[] = "application/json-patch+json";
const char kApplyPatch[] = "application/apply-patch+yaml";

ApiResponse JsonResponse(int status, const std::string& body) {
  ApiResponse r;
  r.status = status;
  r.body = body;
  return r;
}

ApiResponse ErrorResponse(const ApiError& error) {
  ApiResponse r = JsonResponse(error.code(), error.ToJsonText());
  if (error.code() == 429 || error.code() == 503) r.headers.push_back({"Retry-After", "1"});
  return r;
}

// The value of a Warning header carrying `text` (RFC 7234 warn-text).
std::string WarningHeader(const std::string& text) {
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return "299 - " + quoted + "\"";
}

void AddWarnings(const std::vector<std::string>& warnings, ApiResponse* response) {
  for (const std::string& w : warnings) response->headers.push_back({"Warning", WarningHeader(w)});
}

// Content-Type without parameters, lower case.
std::string MediaType(const std::string& content_type) {
  std::string t = content_type.substr(0, content_type.find(';'));
  while (!t.empty() && t.back() == ' ') t.pop_back();
  for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return t;
}

ApiError ParseJsonBody(const std::string& body, json* out) {
  if (body.empty()) {
    return ApiError::BadRequest("couldn't get version/kind; json parse error: unexpected end of "
                                "JSON input");
  }
  try {
    *out = json::parse(body);
  } catch (const json::parse_error& e) {
    return ApiError::BadRequest(std::string("couldn't get version/kind; json parse error: ") +
                                e.what());
  }
  return ApiError();
}

// What Go's decoder says about a field of the wrong JSON type.
ApiError WrongType(const ResourceType& type, const std::string& field, const json& value,
                   const std::string& go_type) {
  return ApiError::BadRequest(type.kind + " in version \"" + type.version +
                              "\" cannot be handled as a " + type.kind +
                              ": json: cannot unmarshal " + value.type_name() +
                              " into Go struct field " + field + " of type " + go_type);
}

// The metadata fields (and a typed kind's spec and status) must have the
// JSON types the real decoder insists on; a custom resource's spec and
// status are the schema's business.
ApiError CheckFieldTypes(const ResourceType& type, const json& object) {
  const json& meta = object["metadata"];
  for (const char* field : {"name", "namespace", "generateName", "resourceVersion", "uid"}) {
    if (meta.contains(field) && !meta[field].is_string() && !meta[field].is_null()) {
      return WrongType(type, std::string("ObjectMeta.metadata.") + field, meta[field], "string");
    }
  }
  for (const char* field : {"labels", "annotations"}) {
    if (!meta.contains(field) || meta[field].is_null()) continue;
    if (!meta[field].is_object()) {
      return WrongType(type, std::string("ObjectMeta.metadata.") + field, meta[field],
                       "map[string]string");
    }
    for (const auto& item : meta[field].items()) {
      if (!item.value().is_string()) {
        return WrongType(type, std::string("ObjectMeta.metadata.") + field, item.value(), "string");
      }
    }
  }
  for (const char* field : {"ownerReferences", "finalizers", "managedFields"}) {
    if (meta.contains(field) && !meta[field].is_array() && !meta[field].is_null()) {
      return WrongType(type, std::string("ObjectMeta.metadata.") + field, meta[field], "[]");
    }
  }
  if (meta.contains("ownerReferences") && meta["ownerReferences"].is_array()) {
    for (const json& ref : meta["ownerReferences"]) {
      if (!ref.is_object()) {
        return WrongType(type, "ObjectMeta.metadata.ownerReferences", ref, "v1.OwnerReference");
      }
    }
  }
  if (type.rules != KindRules::kCustomResource) {
    for (const char* field : {"spec", "status"}) {
      if (object.contains(field) && !object[field].is_object() && !object[field].is_null()) {
        return WrongType(type, type.kind + "." + field, object[field], "object");
      }
    }
  }
  return ApiError();
}

// The body of a create or update: an object of the URL's kind.
ApiError ParseObjectBody(const ResourceType& type, const std::string& body,
                         const std::string& media_type, json* out) {
  if (media_type == "application/yaml") {
    Status s = YamlToJson(body, out);
    if (!s.ok()) return ApiError::BadRequest("error decoding YAML: " + s.message());
  } else if (media_type.empty() || media_type == "application/json" || media_type == "*/*") {
    ApiError e = ParseJsonBody(body, out);
    if (!e.ok()) return e;
  } else {
    return ApiError::UnsupportedMediaType({"application/json", "application/yaml"});
  }
  if (!out->is_object()) {
    return ApiError::BadRequest("couldn't get version/kind; json parse error: json: cannot "
                                "unmarshal " + std::string(out->type_name()) +
                                " into Go value of type struct { APIVersion string "
                                "\"json:\\\"apiVersion,omitempty\\\"\"; Kind string "
                                "\"json:\\\"kind,omitempty\\\"\" }");
  }
  const std::string kind = StringField(*out, {"kind"});
  const std::string api_version = StringField(*out, {"apiVersion"});
  if (kind.empty()) return ApiError::BadRequest("Object 'Kind' is missing in '" + body + "'");
  if (api_version.empty()) {
    return ApiError::BadRequest("Object 'apiVersion' is missing in '" + body + "'");
  }
  if (api_version != type.api_version()) {
    return ApiError::BadRequest("the API version in the data (" + api_version +
                                ") does not match the expected API version (" +
                                type.api_version() + ")");
  }
  if (kind != type.kind) {
    return ApiError::BadRequest("the kind in the data (" + kind +
                                ") does not match the expected kind (" + type.kind + ")");
  }
  if (out->contains("metadata") && !(*out)["metadata"].is_object() && !(*out)["metadata"].is_null()) {
    return ApiError::BadRequest(type.kind + " in version \"" + type.version +
                                "\" cannot be handled as a " + type.kind +
                                ": json: cannot unmarshal " + (*out)["metadata"].type_name() +
                                " into Go struct field " + type.kind +
                                ".metadata of type v1.ObjectMeta");
  }
  if (!(*out)["metadata"].is_object()) (*out)["metadata"] = json::object();
  return CheckFieldTypes(type, *out);
}

// Checks the object's name and namespace against the URL; fills them in
// when the object leaves them out.
ApiError MatchUrl(const ResourceType& type, const std::string& ns, const std::string& name,
                  json* object) {
  json& meta = (*object)["metadata"];
  const std::string body_ns = StringField(meta, {"namespace"});
  if (type.namespaced) {
    if (!body_ns.empty() && body_ns != ns) {
      return ApiError::BadRequest(
          "the namespace of the provided object does not match the namespace sent on the "
          "request");
    }
    meta["namespace"] = ns;
  } else {
    meta.erase("namespace");
  }
  if (!name.empty()) {
    const std::string body_name = StringField(meta, {"name"});
    if (!body_name.empty() && body_name != name) {
      return ApiError::BadRequest("the name of the object (" + body_name +
                                  ") does not match the name on the URL (" + name + ")");
    }
    meta["name"] = name;
  }
  return ApiError();
}

std::string ManagerName(const ResourceRequest& r) {
  auto it = r.query.find("fieldManager");
  if (it != r.query.end() && !it->second.empty()) return it->second;
  const std::string agent = r.http->Header("user-agent");
  const std::string prefix = agent.substr(0, agent.find('/'));
  return prefix.empty() ? "unknown" : prefix;
}

json WithoutManagedFields(json object) {
  if (object.contains("metadata") && object["metadata"].is_object()) {
    object["metadata"].erase("managedFields");
  }
  return object;
}

ManagedFields DecodeManagedFields(const json& object) {
  ManagedFields fields;
  if (object.contains("metadata") && object["metadata"].is_object() &&
      object["metadata"].contains("managedFields")) {
    // Entries the server wrote itself always decode; anything else is
    // dropped rather than failing the write.
    if (!ManagedFields::Decode(object["metadata"]["managedFields"], &fields).ok()) {
      fields = ManagedFields();
    }
  }
  return fields;
}

void SetManagedFields(const ManagedFields& fields, json* object) {
  if (fields.empty()) {
    (*object)["metadata"].erase("managedFields");
  } else {
    (*object)["metadata"]["managedFields"] = fields.Encode();
  }
}

// The resourceVersion and uid a write requires ("" for none) against the
// stored object: 409 when they differ.
ApiError CheckPreconditions(const ResourceType& type, const json& current, const std::string& rv,
                            const std::string& uid) {
  const std::string name = StringField(current, {"metadata", "name"});
  if (!rv.empty() && rv != StringField(current, {"metadata", "resourceVersion"})) {
    return ApiError::StaleResourceVersion(type.group, type.resource, name);
  }
  const std::string current_uid = StringField(current, {"metadata", "uid"});
  if (!uid.empty() && uid != current_uid) {
    return ApiError::Conflict(type.group, type.resource, name,
                              "Precondition failed: UID in precondition: " + uid +
                                  ", UID in object meta: " + current_uid);
  }
  return ApiError();
}

void KeepStatus(const json& current, json* next) {
  if (current.contains("status")) {
    (*next)["status"] = current["status"];
  } else {
    next->erase("status");
  }
}

ShapeFunction ShapeFunctionFor(const ResourceType& type) {
  return [&type](const std::vector<std::string>& names) { return ShapeOf(type, names); };
}

void SetAt(json* object, const std::vector<std::string>& path, json value) {
  json* current = object;
  for (const std::string& key : path) {
    if (!current->is_object()) *current = json::object();
    current = &(*current)[key];
  }
  *current = std::move(value);
}

ordered_json ScaleView(const ResourceType& type, const json& object) {
  const json& meta = object["metadata"];
  ordered_json scale;
  scale["kind"] = "Scale";
  scale["apiVersion"] = "autoscaling/v1";
  ordered_json m;
  for (const char* field : {"name", "namespace", "uid", "resourceVersion", "creationTimestamp"}) {
    if (meta.contains(field)) m[field] = ordered_json::parse(meta[field].dump());
  }
  scale["metadata"] = m;
  const json* spec_replicas = FindField(object, type.scale->spec_replicas_path);
  const json* status_replicas = FindField(object, type.scale->status_replicas_path);
  scale["spec"] = {{"replicas", spec_replicas != nullptr && spec_replicas->is_number()
                                    ? spec_replicas->get<int64_t>()
                                    : 0}};
  ordered_json status;
  status["replicas"] = status_replicas != nullptr && status_replicas->is_number()
                           ? status_replicas->get<int64_t>()
                           : 0;
  if (!type.scale->label_selector_path.empty()) {
    const json* selector = FindField(object, type.scale->label_selector_path);
    if (selector != nullptr && selector->is_string()) status["selector"] = selector->get<std::string>();
  }
  scale["status"] = status;
  return scale;
}

bool ParseInt64(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  try {
    size_t used = 0;
    *out = std::stoll(text, &used);
    return used == text.size();
  } catch (const std::exception&) {
    return false;
  }
}

// Applies a merge or JSON patch to `target`.
ApiError ApplyJsonPatch(const std::string& media_type, const json& patch, json* target) {
  if (media_type == kMergePatch) {
    if (!patch.is_object()) {
      return ApiError::ForCode(422, "the patch must be a JSON object");
    }
    target->merge_patch(patch);
    return ApiError();
  }
  try {
    *target = target->patch(patch);
  } catch (const json::exception& e) {
    return ApiError::ForCode(422, std::string("the JSON patch cannot be applied: ") + e.what());
  }
  return ApiError();
}

ApiError CheckDryRun(const ResourceRequest& r) {
  if (r.query.count("dryRun")) {
    return ApiError::BadRequest("dryRun is not supported by the fake API server");
  }
  return ApiError();
}

}  // namespace

ResourceService::ResourceService(ResourceRegistry* registry, ObjectStore* store,
                                 const Options& options)
    : registry_(registry), store_(store), options_(options) {}

std::string ResourceService::AllocateClusterIp() {
  const uint32_t n = next_cluster_ip_++;
  return "10.96." + std::to_string((n >> 8) & 0xFF) + "." + std::to_string(n & 0xFF);
}

ApiResponse ResourceService::Serve(const ResourceRequest& r) {
  const std::string& sub = r.subresource;
  if (!CheckDryRun(r).ok()) return ErrorResponse(CheckDryRun(r));
  if (sub.empty()) {
    if (r.verb == "get") return Get(r);
    if (r.verb == "list") return List(r);
    if (r.verb == "watch") return Watch(r);
    if (r.verb == "create") return Create(r);
    if (r.verb == "update") return Update(r);
    if (r.verb == "patch") return Patch(r);
    if (r.verb == "delete") return Delete(r);
    if (r.verb == "deletecollection") return DeleteCollection(r);
  } else if (sub == "status" && r.type->status_subresource) {
    if (r.verb == "get") return Get(r);
    if (r.verb == "update") return Update(r);
    if (r.verb == "patch") return Patch(r);
  } else if (sub == "scale" && r.type->scale) {
    if (r.verb == "get") return GetScale(r);
    if (r.verb == "update" || r.verb == "patch") return WriteScale(r);
  } else if (sub == "eviction" && r.type->rules == KindRules::kPod) {
    if (r.verb == "create") return Evict(r);
  } else if (sub == "binding" && r.type->rules == KindRules::kPod) {
    if (r.verb == "create") return Bind(r);
  } else {
    return ErrorResponse(ApiError::PathNotFound());
  }
  return ErrorResponse(ApiError::MethodNotAllowed());
}

ApiResponse ResourceService::Get(const ResourceRequest& r) {
  json object;
  ApiError e = store_->Get(*r.type, r.ns, r.name, &object);
  if (!e.ok()) return ErrorResponse(e);
  const std::string accept = r.http->Header("accept");
  if (accept.find("as=Table") != std::string::npos && r.type->rules == KindRules::kCustomResource) {
    auto include = r.query.find("includeObject");
    return JsonResponse(
        200, TableView(*r.type, {object}, StringField(object, {"metadata", "resourceVersion"}), "",
                       include == r.query.end() ? "Metadata" : include->second,
                       std::chrono::system_clock::now())
                 .dump());
  }
  return JsonResponse(200, object.dump());
}

ApiError ResourceService::ParseListOptions(const ResourceRequest& r,
                                           ObjectStore::ListOptions* out) {
  out->ns = r.ns;
  auto param = [&](const char* key) {
    auto it = r.query.find(key);
    return it == r.query.end() ? std::string() : it->second;
  };
  Status s = LabelSelector::Parse(param("labelSelector"), &out->labels);
  if (!s.ok()) return ApiError::BadRequest(s.message());
  s = FieldSelector::Parse(param("fieldSelector"), &out->fields);
  if (!s.ok()) return ApiError::BadRequest(s.message());
  for (const std::string& field : out->fields.Fields()) {
    std::string ignored;
    if (!SelectableField(*r.type, json::object(), field, &ignored)) {
      return ApiError::BadRequest("field label not supported: " + field);
    }
  }
  const std::string limit = param("limit");
  if (!limit.empty() && (!ParseInt64(limit, &out->limit) || out->limit < 0)) {
    return ApiError::BadRequest("limit: Invalid value: " + json(limit).dump() +
                                ": must be a non-negative integer");
  }
  out->continue_token = param("continue");
  const std::string rv = param("resourceVersion");
  int64_t requested = 0;
  if (!rv.empty() && (!ParseInt64(rv, &requested) || requested < 0)) {
    return ApiError::BadRequest("resourceVersion: Invalid value: " + json(rv).dump() +
                                ": must be a valid resource version");
  }
  if (!rv.empty() && static_cast<uint64_t>(requested) > store_->resource_version()) {
    return ApiError::TooLargeResourceVersion(static_cast<uint64_t>(requested),
                                             store_->resource_version());
  }
  return ApiError();
}

ApiResponse ResourceService::List(const ResourceRequest& r) {
  ObjectStore::ListOptions options;
  ApiError e = ParseListOptions(r, &options);
  if (!e.ok()) return ErrorResponse(e);
  ObjectStore::ListResult result;
  e = store_->List(*r.type, options, &result);
  if (!e.ok()) return ErrorResponse(e);
  const std::string rv = std::to_string(result.resource_version);
  const std::string accept = r.http->Header("accept");
  if (accept.find("as=Table") != std::string::npos && r.type->rules == KindRules::kCustomResource) {
    auto include = r.query.find("includeObject");
    return JsonResponse(200, TableView(*r.type, result.items, rv, result.continue_token,
                                       include == r.query.end() ? "Metadata" : include->second,
                                       std::chrono::system_clock::now())
                                 .dump());
  }
  json list;
  list["apiVersion"] = r.type->api_version();
  list["kind"] = r.type->list_kind;
  json meta = {{"resourceVersion", rv}};
  if (!result.continue_token.empty() || r.type->rules == KindRules::kCustomResource) {
    meta["continue"] = result.continue_token;
  }
  if (result.remaining_item_count) meta["remainingItemCount"] = *result.remaining_item_count;
  list["metadata"] = meta;
  list["items"] = json::array();
  for (json& item : result.items) list["items"].push_back(std::move(item));
  return JsonResponse(200, list.dump());
}

ApiResponse ResourceService::Watch(const ResourceRequest& r) {
  ObjectStore::ListOptions options;
  ApiError e = ParseListOptions(r, &options);
  if (!e.ok()) return ErrorResponse(e);
  auto param = [&](const char* key) {
    auto it = r.query.find(key);
    return it == r.query.end() ? std::string() : it->second;
  };
  std::chrono::milliseconds timeout = options_.default_watch_timeout;
  const std::string timeout_text = param("timeoutSeconds");
  if (!timeout_text.empty()) {
    int64_t seconds = 0;
    if (!ParseInt64(timeout_text, &seconds) || seconds < 0) {
      return ErrorResponse(ApiError::BadRequest("timeoutSeconds: Invalid value: " +
                                                json(timeout_text).dump() +
                                                ": must be a non-negative integer"));
    }
    if (seconds > 0) timeout = std::chrono::seconds(seconds);
  }
  const std::string bookmarks = param("allowWatchBookmarks");
  std::unique_ptr<ObjectStore::Watch> watch;
  e = store_->StartWatch(*r.type, r.ns, options.labels, options.fields, param("resourceVersion"),
                         &watch);
  if (!e.ok()) return ErrorResponse(e);
  ApiResponse response;
  response.watch = std::make_unique<WatchSession>(
      std::move(watch), bookmarks == "true" || bookmarks == "1", options_.bookmark_interval,
      timeout);
  return response;
}

ApiResponse ResourceService::Create(const ResourceRequest& r) {
  const ResourceType& type = *r.type;
  json object;
  ApiError e = ParseObjectBody(type, r.http->body, MediaType(r.http->Header("content-type")),
                               &object);
  if (!e.ok()) return ErrorResponse(e);
  e = MatchUrl(type, r.ns, "", &object);
  if (!e.ok()) return ErrorResponse(e);
  std::vector<std::string> warnings;
  e = DecodeObject(type, &object, &warnings);
  if (!e.ok()) return ErrorResponse(e);
  object = WithoutManagedFields(std::move(object));
  const std::string now = store_->Now();
  ManagedFields fields;
  fields.RecordUpdate(ManagerName(r), "", type.api_version(), now, EmptyObject(type), object,
                      ShapeFunctionFor(type));
  PrepareForCreate(type, &object, [this] { return AllocateClusterIp(); });
  if (type.rules == KindRules::kCustomResourceDefinition) SetAcceptedCrdStatus(now, &object);
  fields.ForgetMissingFields(object);
  SetManagedFields(fields, &object);
  std::vector<StatusCause> causes;
  ValidateObject(type, nullptr, object, &causes);
  if (!causes.empty()) {
    ApiResponse response = ErrorResponse(ApiError::Invalid(
        type.group, type.kind, StringField(object, {"metadata", "name"}), std::move(causes)));
    AddWarnings(warnings, &response);
    return response;
  }
  ObjectStore::WriteResult result;
  e = store_->Create(type, std::move(object), &result);
  if (!e.ok()) return ErrorResponse(e);
  return Written(type, result, warnings);
}

ApiResponse ResourceService::Written(const ResourceType& type,
                                     const ObjectStore::WriteResult& result,
                                     const std::vector<std::string>& warnings) {
  if (type.rules == KindRules::kCustomResourceDefinition && !result.removed) {
    std::vector<StatusCause> ignored;  // validated before it was written
    registry_->RegisterCrd(result.object, &ignored);
  }
  ApiResponse response = JsonResponse(result.created ? 201 : 200, result.object.dump());
  AddWarnings(warnings, &response);
  return response;
}

ApiError ResourceService::FinishUpdate(const ResourceType& type, const json& current,
                                       const std::string& manager,
                                       const std::string& subresource, json* next) {
  KeepServerOwnedMetadata(current, next);
  const json before = WithoutManagedFields(current);
  json after = WithoutManagedFields(*next);
  if (after == before) {
    *next = current;
    return ApiError();
  }
  ManagedFields fields = DecodeManagedFields(current);
  fields.RecordUpdate(manager, subresource, type.api_version(), store_->Now(), before, after,
                      ShapeFunctionFor(type));
  if (subresource == "scale") fields.ForgetSubresource("scale");
  SetManagedFields(fields, &after);
  std::vector<StatusCause> causes;
  ValidateObject(type, &current, after, &causes);
  if (!causes.empty()) {
    return ApiError::Invalid(type.group, type.kind, StringField(after, {"metadata", "name"}),
                             std::move(causes));
  }
  *next = std::move(after);
  return ApiError();
}

ApiResponse ResourceService::Update(const ResourceRequest& r) {
  const ResourceType& type = *r.type;
  json object;
  ApiError e = ParseObjectBody(type, r.http->body, MediaType(r.http->Header("content-type")),
                               &object);
  if (!e.ok()) return ErrorResponse(e);
  e = MatchUrl(type, r.ns, r.name, &object);
  if (!e.ok()) return ErrorResponse(e);
  std::vector<std::string> warnings;
  e = DecodeObject(type, &object, &warnings);
  if (!e.ok()) return ErrorResponse(e);
  const bool conditional_only = type.rules == KindRules::kCustomResource ||
                                type.rules == KindRules::kCustomResourceDefinition;
  const std::string manager = ManagerName(r);
  const bool status_only = r.subresource == "status";
  ObjectStore::WriteResult result;
  e = store_->Update(
      type, r.ns, r.name, /*create_if_absent=*/false,
      [&](const json* current, json* next) -> ApiError {
        const json& meta = object["metadata"];
        const std::string rv = StringField(meta, {"resourceVersion"});
        if (rv.empty() && conditional_only) {
          return ApiError::Invalid(
              type.group, type.kind, r.name,
              {{"FieldValueInvalid", "Invalid value: 0x0: must be specified for an update",
                "metadata.resourceVersion"}});
        }
        ApiError precondition =
            CheckPreconditions(type, *current, rv, StringField(meta, {"uid"}));
        if (!precondition.ok()) return precondition;
        if (status_only) {
          *next = *current;
          KeepStatus(object, next);
        } else {
          *next = object;
          const json* managed = FindField(*current, {"metadata", "managedFields"});
          (*next)["metadata"]["managedFields"] = managed != nullptr ? *managed : json();
          if (type.status_subresource) KeepStatus(*current, next);
          PrepareForUpdate(type, *current, next);
        }
        return FinishUpdate(type, *current, manager, r.subresource, next);
      },
      &result);
  if (!e.ok()) return ErrorResponse(e);
  return Written(type, result, warnings);
}

ApiResponse ResourceService::Patch(const ResourceRequest& r) {
  const ResourceType& type = *r.type;
  const std::string media_type = MediaType(r.http->Header("content-type"));
  if (media_type == kApplyPatch) return Apply(r);
  if (media_type != kMergePatch && media_type != kJsonPatch) {
    return ErrorResponse(ApiError::UnsupportedMediaType({kJsonPatch, kMergePatch, kApplyPatch}));
  }
  if (r.query.count("force")) {
    return ErrorResponse(ApiError::Invalid(
        "meta.k8s.io", "PatchOptions", "",
        {ForbiddenField("force", "may not be specified for non-apply patch")}));
  }
  json patch;
  ApiError e = ParseJsonBody(r.http->body, &patch);
  if (!e.ok()) return ErrorResponse(e);
  const std::string manager = ManagerName(r);
  const bool status_only = r.subresource == "status";
  std::vector<std::string> warnings;
  ObjectStore::WriteResult result;
  e = store_->Update(
      type, r.ns, r.name, /*create_if_absent=*/false,
      [&](const json* current, json* next) -> ApiError {
        json patched = *current;
        ApiError error = ApplyJsonPatch(media_type, patch, &patched);
        if (!error.ok()) return error;
        if (!patched.is_object()) return ApiError::ForCode(422, "the patched object is not an object");
        if (StringField(patched, {"apiVersion"}) != type.api_version() ||
            StringField(patched, {"kind"}) != type.kind) {
          return ApiError::BadRequest("the API version or kind of the object may not be patched");
        }
        if (!patched["metadata"].is_object()) patched["metadata"] = json::object();
        // A patch that sets metadata.resourceVersion or uid makes them preconditions.
        ApiError precondition =
            CheckPreconditions(type, *current, StringField(patched, {"metadata", "resourceVersion"}),
                               StringField(patched, {"metadata", "uid"}));
        if (!precondition.ok()) return precondition;
        if (status_only) {
          *next = *current;
          KeepStatus(patched, next);
        } else {
          *next = std::move(patched);
          if (type.status_subresource) KeepStatus(*current, next);
          PrepareForUpdate(type, *current, next);
        }
        warnings.clear();
        error = DecodeObject(type, next, &warnings);
        if (!error.ok()) return error;
        return FinishUpdate(type, *current, manager, r.subresource, next);
      },
      &result);
  if (!e.ok()) return ErrorResponse(e);
  return Written(type, result, warnings);
}

ApiResponse ResourceService::Apply(const ResourceRequest& r) {
  const ResourceType& type = *r.type;
  auto manager_it = r.query.find("fieldManager");
  if (manager_it == r.query.end() || manager_it->second.empty()) {
    return ErrorResponse(ApiError::Invalid(
        "meta.k8s.io", "PatchOptions", "",
        {RequiredField("fieldManager", "is required for apply patch")}));
  }
  const std::string manager = manager_it->second;
  if (manager.size() > 128) {
    return ErrorResponse(ApiError::Invalid(
        "meta.k8s.io", "PatchOptions", "",
        {{"FieldValueTooLong", "Too long: must have at most 128 bytes", "fieldManager"}}));
  }
  auto force_it = r.query.find("force");
  const bool force = force_it != r.query.end() && (force_it->second == "true" || force_it->second == "1");
  json applied;
  Status s = YamlToJson(r.http->body, &applied);
  if (!s.ok()) return ErrorResponse(ApiError::BadRequest("error decoding YAML: " + s.message()));
  if (!applied.is_object()) {
    return ErrorResponse(ApiError::BadRequest("error decoding YAML: the applied configuration "
                                              "must be an object"));
  }
  ApiError e = ParseObjectBody(type, applied.dump(), "application/json", &applied);
  if (!e.ok()) return ErrorResponse(e);
  e = MatchUrl(type, r.ns, r.name, &applied);
  if (!e.ok()) return ErrorResponse(e);
  std::vector<std::string> warnings;
  if (type.rules == KindRules::kCustomResource && type.schema != nullptr) {
    std::vector<std::string> unknown;
    type.schema->Prune(&applied, &unknown);
    for (const std::string& f : unknown) warnings.push_back("unknown field " + json(f).dump());
  }
  json& applied_meta = applied["metadata"];
  const std::string precondition_rv = StringField(applied_meta, {"resourceVersion"});
  const std::string precondition_uid = StringField(applied_meta, {"uid"});
  for (const char* field : {"resourceVersion", "uid", "managedFields", "creationTimestamp",
                            "deletionTimestamp", "deletionGracePeriodSeconds", "generation",
                            "selfLink"}) {
    applied_meta.erase(field);
  }
  const bool status_only = r.subresource == "status";
  if (status_only) {
    json status_config = {{"apiVersion", applied["apiVersion"]},
                          {"kind", applied["kind"]},
                          {"metadata", applied["metadata"]}};
    if (applied.contains("status")) status_config["status"] = applied["status"];
    applied = std::move(status_config);
  } else if (type.status_subresource) {
    applied.erase("status");
  }
  ObjectStore::WriteResult result;
  e = store_->Update(
      type, r.ns, r.name, /*create_if_absent=*/!status_only,
      [&](const json* current, json* next) -> ApiError {
        if (current != nullptr) {
          ApiError precondition =
              CheckPreconditions(type, *current, precondition_rv, precondition_uid);
          if (!precondition.ok()) return precondition;
        }
        json live;
        if (current != nullptr) {
          live = WithoutManagedFields(*current);
        } else {
          live = EmptyObject(type);
          live["apiVersion"] = type.api_version();
          live["kind"] = type.kind;
          live["metadata"] = applied["metadata"];
        }
        ManagedFields fields =
            current != nullptr ? DecodeManagedFields(*current) : ManagedFields();
        const ManagedFields fields_before = fields;
        json merged;
        ApiError error = fields.Apply(manager, force, r.subresource, type.api_version(),
                                      store_->Now(), live, applied, ShapeFunctionFor(type),
                                      &merged);
        if (!error.ok()) return error;
        if (status_only) {
          *next = live;
          KeepStatus(merged, next);
        } else {
          *next = std::move(merged);
        }
        std::vector<std::string> decode_warnings;
        error = DecodeObject(type, next, &decode_warnings);
        if (!error.ok()) return error;
        if (current == nullptr) {
          PrepareForCreate(type, next, [this] { return AllocateClusterIp(); });
          if (type.rules == KindRules::kCustomResourceDefinition) {
            SetAcceptedCrdStatus(store_->Now(), next);
          }
        } else if (!status_only) {
          if (type.status_subresource) KeepStatus(*current, next);
          PrepareForUpdate(type, *current, next);
        }
        fields.ForgetMissingFields(*next);
        if (current != nullptr) {
          KeepServerOwnedMetadata(*current, next);
          if (WithoutManagedFields(*next) == live && fields.SameOwnership(fields_before)) {
            *next = *current;  // applying what is there already writes nothing
            return ApiError();
          }
        }
        SetManagedFields(fields, next);
        std::vector<StatusCause> causes;
        ValidateObject(type, current, *next, &causes);
        if (!causes.empty()) {
          return ApiError::Invalid(type.group, type.kind, r.name, std::move(causes));
        }
        return ApiError();
      },
      &result);
  if (!e.ok()) return ErrorResponse(e);
  return Written(type, result, warnings);
}

namespace {

ApiError ParseDeleteOptions(const ResourceRequest& r, DeleteOptions* out) {
  json body = json::object();
  if (!r.http->body.empty()) {
    ApiError e = ParseJsonBody(r.http->body, &body);
    if (!e.ok()) return e;
    if (!body.is_object()) return ApiError::BadRequest("DeleteOptions must be a JSON object");
  }
  auto param = [&](const char* key) -> std::string {
    auto it = r.query.find(key);
    if (it != r.query.end()) return it->second;
    if (body.contains(key) && !body[key].is_null()) {
      return body[key].is_string() ? body[key].get<std::string>() : body[key].dump();
    }
    return "";
  };
  const std::string grace = param("gracePeriodSeconds");
  if (!grace.empty()) {
    int64_t seconds = 0;
    if (!ParseInt64(grace, &seconds)) {
      return ApiError::BadRequest("gracePeriodSeconds: Invalid value: " + json(grace).dump() +
                                  ": must be an integer");
    }
    out->grace_period_seconds = seconds;
  }
  std::string policy = param("propagationPolicy");
  const std::string orphan = param("orphanDependents");
  if (!orphan.empty() && !policy.empty()) {
    return ApiError::Invalid("meta.k8s.io", "DeleteOptions", "",
                             {InvalidField("propagationPolicy", policy,
                                           "orphanDependents and deletionPropagation cannot be "
                                           "both set")});
  }
  if (!orphan.empty()) policy = orphan == "true" ? "Orphan" : "Background";
  if (!policy.empty() && policy != "Foreground" && policy != "Background" && policy != "Orphan") {
    return ApiError::Invalid("meta.k8s.io", "DeleteOptions", "",
                             {UnsupportedField("propagationPolicy", policy,
                                               {"Foreground", "Background", "Orphan"})});
  }
  out->propagation_policy = policy;
  if (body.contains("preconditions") && body["preconditions"].is_object()) {
    const json& p = body["preconditions"];
    if (p.contains("uid") && p["uid"].is_string()) out->precondition_uid = p["uid"].get<std::string>();
    if (p.contains("resourceVersion") && p["resourceVersion"].is_string()) {
      out->precondition_resource_version = p["resourceVersion"].get<std::string>();
    }
  }
  return ApiError();
}

}  // namespace

ApiResponse ResourceService::Delete(const ResourceRequest& r) {
  const ResourceType& type = *r.type;
  DeleteOptions options;
  ApiError e = ParseDeleteOptions(r, &options);
  if (!e.ok()) return ErrorResponse(e);
  ObjectStore::WriteResult result;
  e = store_->Delete(type, r.ns, r.name, options, &result);
  if (!e.ok()) return ErrorResponse(e);
  if (type.rules == KindRules::kCustomResourceDefinition && result.removed) {
    // Deleting a CRD deletes its custom resources, then stops serving them.
    const std::string crd_name = StringField(result.object, {"metadata", "name"});
    for (const ResourceTypePtr& t : registry_->All()) {
      if (t->crd_name != crd_name) continue;
      ObjectStore::ListResult items;
      store_->List(*t, {}, &items);
      for (const json& item : items.items) {
        ObjectStore::WriteResult ignored;
        store_->Delete(*t, StringField(item, {"metadata", "namespace"}),
                       StringField(item, {"metadata", "name"}), DeleteOptions(), &ignored);
      }
    }
    registry_->UnregisterCrd(crd_name);
  }
  if (result.removed && !type.return_deleted_object) {
    return JsonResponse(200, DeletedStatusJson(type.group, type.resource, r.name,
                                               StringField(result.object, {"metadata", "uid"}))
                                 .dump());
  }
  result.object["apiVersion"] = type.api_version();
  return JsonResponse(200, result.object.dump());
}

ApiResponse ResourceService::DeleteCollection(const ResourceRequest& r) {
  const ResourceType& type = *r.type;
  ObjectStore::ListOptions list_options;
  ApiError e = ParseListOptions(r, &list_options);
  if (!e.ok()) return ErrorResponse(e);
  list_options.limit = 0;
  list_options.continue_token.clear();
  DeleteOptions options;
  e = ParseDeleteOptions(r, &options);
  if (!e.ok()) return ErrorResponse(e);
  ObjectStore::ListResult listed;
  e = store_->List(type, list_options, &listed);
  if (!e.ok()) return ErrorResponse(e);
  json list;
  list["apiVersion"] = type.api_version();
  list["kind"] = type.list_kind;
  list["metadata"] = {{"resourceVersion", std::to_string(listed.resource_version)}};
  list["items"] = json::array();
  for (const json& item : listed.items) {
    ObjectStore::WriteResult result;
    if (store_->Delete(type, StringField(item, {"metadata", "namespace"}),
                       StringField(item, {"metadata", "name"}), options, &result)
            .ok()) {
      result.object["apiVersion"] = type.api_version();
      list["items"].push_back(std::move(result.object));
    }
  }
  return JsonResponse(200, list.dump());
}

ApiResponse ResourceService::GetScale(const ResourceRequest& r) {
  json object;
  ApiError e = store_->Get(*r.type, r.ns, r.name, &object);
  if (!e.ok()) return ErrorResponse(e);
  return JsonResponse(200, ScaleView(*r.type, object).dump());
}

ApiResponse ResourceService::WriteScale(const ResourceRequest& r) {
  const ResourceType& type = *r.type;
  const std::string media_type = MediaType(r.http->Header("content-type"));
  json body;
  ApiError e = ParseJsonBody(r.http->body, &body);
  if (!e.ok()) return ErrorResponse(e);
  if (r.verb == "patch" && media_type != kMergePatch && media_type != kJsonPatch) {
    return ErrorResponse(ApiError::UnsupportedMediaType({kJsonPatch, kMergePatch}));
  }
  const std::string manager = ManagerName(r);
  ObjectStore::WriteResult result;
  e = store_->Update(
      type, r.ns, r.name, /*create_if_absent=*/false,
      [&](const json* current, json* next) -> ApiError {
        json scale = json::parse(ScaleView(type, *current).dump());
        if (r.verb == "patch") {
          ApiError error = ApplyJsonPatch(media_type, body, &scale);
          if (!error.ok()) return error;
        } else {
          if (!body.is_object()) return ApiError::BadRequest("a Scale must be a JSON object");
          const std::string kind = StringField(body, {"kind"});
          const std::string api_version = StringField(body, {"apiVersion"});
          if ((!kind.empty() && kind != "Scale") ||
              (!api_version.empty() && api_version != "autoscaling/v1")) {
            return ApiError::BadRequest("the API version in the data (" +
                                        StringField(body, {"apiVersion"}) +
                                        ") does not match the expected API version "
                                        "(autoscaling/v1)");
          }
          scale = body;
        }
        if (!scale.is_object()) return ApiError::BadRequest("a Scale must be a JSON object");
        const json& meta = scale.contains("metadata") && scale["metadata"].is_object()
                               ? scale["metadata"]
                               : json::object();
        const std::string name = StringField(meta, {"name"});
        if (!name.empty() && name != r.name) {
          return ApiError::BadRequest("the name of the object (" + name +
                                      ") does not match the name on the URL (" + r.name + ")");
        }
        ApiError precondition =
            CheckPreconditions(type, *current, StringField(meta, {"resourceVersion"}), "");
        if (!precondition.ok()) return precondition;
        const json* replicas = FindField(scale, {"spec", "replicas"});
        if (replicas == nullptr || !replicas->is_number_integer() || replicas->get<int64_t>() < 0) {
          return ApiError::Invalid("autoscaling", "Scale", r.name,
                                   {InvalidField("spec.replicas",
                                                 replicas == nullptr ? json() : *replicas,
                                                 "must be greater than or equal to 0")});
        }
        *next = *current;
        SetAt(next, type.scale->spec_replicas_path, *replicas);
        std::vector<std::string> ignored;
        ApiError error = DecodeObject(type, next, &ignored);
        if (!error.ok()) return error;
        return FinishUpdate(type, *current, manager, "scale", next);
      },
      &result);
  if (!e.ok()) return ErrorResponse(e);
  return JsonResponse(200, ScaleView(type, result.object).dump());
}

ApiResponse ResourceService::Evict(const ResourceRequest& r) {
  const ResourceType& type = *r.type;
  json eviction;
  ApiError e = ParseJsonBody(r.http->body, &eviction);
  if (!e.ok()) return ErrorResponse(e);
  if (!eviction.is_object() || StringField(eviction, {"kind"}) != "Eviction") {
    return ErrorResponse(ApiError::BadRequest("the body must be a policy/v1 Eviction"));
  }
  const std::string name = eviction.contains("metadata") && eviction["metadata"].is_object()
                               ? StringField(eviction, {"metadata", "name"})
                               : "";
  if (name != r.name) {
    return ErrorResponse(ApiError::BadRequest("name in URL does not match name in Eviction object"));
  }
  DeleteOptions options;
  if (eviction.contains("deleteOptions") && eviction["deleteOptions"].is_object()) {
    const json& d = eviction["deleteOptions"];
    if (d.contains("gracePeriodSeconds") && d["gracePeriodSeconds"].is_number_integer()) {
      options.grace_period_seconds = d["gracePeriodSeconds"].get<int64_t>();
    }
    if (d.contains("propagationPolicy") && d["propagationPolicy"].is_string()) {
      options.propagation_policy = d["propagationPolicy"].get<std::string>();
    }
  }
  // Like v1.26 (PodDisruptionConditions): a running pod is marked as a
  // disruption target before it is deleted.
  const std::string now = store_->Now();
  ObjectStore::WriteResult marked;
  e = store_->Update(
      type, r.ns, r.name, false,
      [&](const json* current, json* next) -> ApiError {
        *next = *current;
        const json& status = (*current)["status"];
        const std::string phase = status.is_object() ? StringField(status, {"phase"}) : "";
        const bool scheduled = (*current)["spec"].is_object() &&
                               !StringField((*current), {"spec", "nodeName"}).empty();
        if (!scheduled || phase == "Succeeded" || phase == "Failed" ||
            (*current)["metadata"].contains("deletionTimestamp")) {
          return ApiError();
        }
        json conditions = status.is_object() && status.contains("conditions") &&
                                  status["conditions"].is_array()
                              ? status["conditions"]
                              : json::array();
        for (const json& c : conditions) {
          if (StringField(c, {"type"}) == "DisruptionTarget") return ApiError();
        }
        conditions.push_back({{"type", "DisruptionTarget"},
                              {"status", "True"},
                              {"lastProbeTime", nullptr},
                              {"lastTransitionTime", now},
                              {"reason", "EvictionByEvictionAPI"},
                              {"message", "Eviction API: evicting"}});
        (*next)["status"]["conditions"] = conditions;
        return FinishUpdate(type, *current, "kube-controller-manager", "status", next);
      },
      &marked);
  if (!e.ok()) return ErrorResponse(e);
  ObjectStore::WriteResult deleted;
  e = store_->Delete(type, r.ns, r.name, options, &deleted);
  if (!e.ok()) return ErrorResponse(e);
  return JsonResponse(201, SuccessStatusJson(201).dump());
}

ApiResponse ResourceService::Bind(const ResourceRequest& r) {
  const ResourceType& type = *r.type;
  json binding;
  ApiError e = ParseJsonBody(r.http->body, &binding);
  if (!e.ok()) return ErrorResponse(e);
  const json* node = binding.is_object() ? FindField(binding, {"target", "name"}) : nullptr;
  if (node == nullptr || !node->is_string() || node->get<std::string>().empty()) {
    return ErrorResponse(
        ApiError::Invalid("", "Binding", r.name, {RequiredField("target.name")}));
  }
  ObjectStore::WriteResult result;
  e = store_->Update(
      type, r.ns, r.name, false,
      [&](const json* current, json* next) -> ApiError {
        const std::string assigned =
            (*current)["spec"].is_object() ? StringField((*current), {"spec", "nodeName"}) : "";
        if (!assigned.empty()) {
          return ApiError::Conflict("", "pods/binding", r.name,
                                    "pod " + r.name + " is already assigned to node \"" +
                                        assigned + "\"");
        }
        if ((*current)["metadata"].contains("deletionTimestamp")) {
          return ApiError::Conflict("", "pods/binding", r.name,
                                    "pod " + r.name + " is being deleted, cannot be assigned to "
                                    "a host");
        }
        *next = *current;
        (*next)["spec"]["nodeName"] = *node;
        json before = WithoutManagedFields(*current);
        json after = WithoutManagedFields(*next);
        ManagedFields fields = DecodeManagedFields(*current);
        fields.RecordUpdate("kube-scheduler", "binding", type.api_version(), store_->Now(), before,
                            after, ShapeFunctionFor(type));
        SetManagedFields(fields, &after);
        *next = std::move(after);
        return ApiError();
      },
      &result);
  if (!e.ok()) return ErrorResponse(e);
  return JsonResponse(201, SuccessStatusJson(201).dump());
}

}  // namespace kube_testing
}  // namespace gaptrain
