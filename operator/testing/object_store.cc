#include "operator/testing/object_store.h"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "operator/testing/base64.h"
#include "operator/testing/kind_rules.h"
#include "operator/testing/managed_fields.h"
#include "operator/testing/json_fields.h"

namespace gaptrain {
namespace kube_testing {

using nlohmann::json;

namespace {

constexpr size_t kMaxSnapshots = 64;
const char kForegroundFinalizer[] = "foregroundDeletion";
const char kOrphanFinalizer[] = "orphan";
const char kContinueVersion[] = "meta.k8s.io/v1";

json Finalizers(const json& object) {
  const json& meta = object["metadata"];
  if (meta.is_object() && meta.contains("finalizers") && meta["finalizers"].is_array()) {
    return meta["finalizers"];
  }
  return json::array();
}

bool HasFinalizer(const json& object, const std::string& finalizer) {
  for (const json& f : Finalizers(object)) {
    if (f == finalizer) return true;
  }
  return false;
}

void SetFinalizers(json* object, const json& finalizers) {
  if (finalizers.empty()) {
    (*object)["metadata"].erase("finalizers");
  } else {
    (*object)["metadata"]["finalizers"] = finalizers;
  }
}

json OwnerReferences(const json& object) {
  const json& meta = object["metadata"];
  if (meta.is_object() && meta.contains("ownerReferences") && meta["ownerReferences"].is_array()) {
    return meta["ownerReferences"];
  }
  return json::array();
}

bool IsBeingDeleted(const json& object) {
  return object["metadata"].is_object() && object["metadata"].contains("deletionTimestamp");
}

int64_t DeletionGracePeriod(const json& object) {
  const json& meta = object["metadata"];
  if (meta.is_object() && meta.contains("deletionGracePeriodSeconds") &&
      meta["deletionGracePeriodSeconds"].is_number_integer()) {
    return meta["deletionGracePeriodSeconds"].get<int64_t>();
  }
  return 0;
}

// Everything outside metadata and status: what metadata.generation tracks.
json SpecPart(const json& object) {
  json copy = object;
  copy.erase("metadata");
  copy.erase("status");
  return copy;
}

// Drops managedFields entries for fields an internal write removed.
void ForgetMissingManagedFields(json* object) {
  json& meta = (*object)["metadata"];
  if (!meta.contains("managedFields")) return;
  ManagedFields fields;
  if (!ManagedFields::Decode(meta["managedFields"], &fields).ok()) return;
  fields.ForgetMissingFields(*object);
  if (fields.empty()) {
    meta.erase("managedFields");
  } else {
    meta["managedFields"] = fields.Encode();
  }
}

std::string GroupOf(const std::string& api_version) {
  const size_t slash = api_version.find('/');
  return slash == std::string::npos ? "" : api_version.substr(0, slash);
}

}  // namespace

std::string WatchEvent::Encode() const {
  return "{\"type\":" + json(type).dump() + ",\"object\":" +
         (encoded_object.empty() ? object.dump() : encoded_object) + "}";
}

class ObjectStore::View : public StoreView {
 public:
  explicit View(const ObjectStore* store) : store_(store) {}
  const json* Get(const std::string& resource_key, const std::string& ns,
                  const std::string& name) const override {
    auto type = store_->objects_.find(resource_key);
    if (type == store_->objects_.end()) return nullptr;
    auto it = type->second.find(ObjectKey(ns, name));
    return it == type->second.end() ? nullptr : &it->second;
  }
  std::vector<const json*> List(const std::string& resource_key,
                                const std::string& ns) const override {
    std::vector<const json*> out;
    auto type = store_->objects_.find(resource_key);
    if (type == store_->objects_.end()) return out;
    for (const auto& [key, object] : type->second) {
      if (ns.empty() || StringField(object, {"metadata", "namespace"}) == ns) out.push_back(&object);
    }
    return out;
  }
  uint64_t resource_version() const override { return store_->resource_version_; }

 private:
  const ObjectStore* store_;
};

ObjectStore::ObjectStore(const ResourceRegistry* registry, const Options& options)
    : registry_(registry), options_(options), random_(options.random_seed) {}

std::string ObjectStore::TimestampLocked(int64_t offset_seconds) const {
  const auto t = options_.clock() + std::chrono::seconds(offset_seconds);
  const time_t seconds = std::chrono::system_clock::to_time_t(t);
  struct tm utc;
  gmtime_r(&seconds, &utc);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

std::string ObjectStore::Now() const { return TimestampLocked(0); }

std::string ObjectStore::NewUidLocked() {
  uint64_t hi = random_();
  uint64_t lo = random_();
  hi = (hi & ~0xF000ull) | 0x4000ull;                           // version 4
  lo = (lo & ~(0xC000ull << 48)) | (0x8000ull << 48);           // RFC 4122 variant
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%08x-%04x-%04x-%04x-%012llx",
                static_cast<unsigned>(hi >> 32), static_cast<unsigned>((hi >> 16) & 0xFFFF),
                static_cast<unsigned>(hi & 0xFFFF), static_cast<unsigned>(lo >> 48),
                static_cast<unsigned long long>(lo & 0xFFFFFFFFFFFFull));
  return buf;
}

std::string ObjectStore::RandomSuffixLocked() {
  // apimachinery's utilrand alphabet: no vowels, no confusable digits.
  static const char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  std::string s;
  for (int i = 0; i < 5; ++i) s += kAlphabet[random_() % (sizeof(kAlphabet) - 1)];
  return s;
}

uint64_t ObjectStore::resource_version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return resource_version_;
}

void ObjectStore::RecordEventLocked(const std::string& resource_key, const std::string& type,
                                    const json& object, const json& previous) {
  History& history = histories_[resource_key];
  history.events.push_back({type, resource_version_, object, previous});
  while (history.events.size() > std::max<size_t>(options_.watch_history_size, 1)) {
    history.oldest_servable = history.events.front().resource_version;
    history.events.pop_front();
  }
}

void ObjectStore::CommitLocked(const ResourceType& type, const json* previous, json object,
                               WriteResult* out) {
  if (IsBeingDeleted(object) && Finalizers(object).empty() && DeletionGracePeriod(object) == 0) {
    RemoveLocked(type, std::move(object), out);
    return;
  }
  ++resource_version_;
  object["metadata"]["resourceVersion"] = std::to_string(resource_version_);
  const std::string key = ObjectKey(StringField(object, {"metadata", "namespace"}), StringField(object, {"metadata", "name"}));
  RecordEventLocked(type.key(), previous == nullptr ? "ADDED" : "MODIFIED", object,
                    previous == nullptr ? json() : *previous);
  ObjectsOf(type.key())[key] = object;
  out->object = std::move(object);
  out->removed = false;
  changed_.notify_all();
}

void ObjectStore::RemoveLocked(const ResourceType& type, json object, WriteResult* out) {
  ++resource_version_;
  object["metadata"]["resourceVersion"] = std::to_string(resource_version_);
  const std::string key = ObjectKey(StringField(object, {"metadata", "namespace"}), StringField(object, {"metadata", "name"}));
  ObjectsOf(type.key()).erase(key);
  RecordEventLocked(type.key(), "DELETED", object, object);
  out->object = object;
  out->removed = true;
  changed_.notify_all();
  CollectDependentsLocked(object, /*foreground=*/false);
  ReleaseForegroundOwnersLocked(object);
}

ApiError ObjectStore::Create(const ResourceType& type, json object, WriteResult* out) {
  std::lock_guard<std::mutex> lock(mu_);
  return CreateLocked(type, std::move(object), out);
}

ApiError ObjectStore::CreateLocked(const ResourceType& type, json object, WriteResult* out) {
  if (!object["metadata"].is_object()) object["metadata"] = json::object();
  json& meta = object["metadata"];
  std::string ns = type.namespaced ? StringField(meta, {"namespace"}) : "";
  std::string name = StringField(meta, {"name"});
  ObjectMap& objects = ObjectsOf(type.key());
  if (name.empty()) {
    const std::string prefix = StringField(meta, {"generateName"}).substr(0, 58);
    do {
      name = prefix + RandomSuffixLocked();
    } while (objects.count(ObjectKey(ns, name)));
  }
  if (objects.count(ObjectKey(ns, name))) {
    return ApiError::AlreadyExists(type.group, type.resource, name);
  }
  meta["name"] = name;
  if (type.namespaced) {
    meta["namespace"] = ns;
  } else {
    meta.erase("namespace");
  }
  meta["uid"] = NewUidLocked();
  meta["creationTimestamp"] = TimestampLocked(0);
  meta.erase("deletionTimestamp");
  meta.erase("deletionGracePeriodSeconds");
  meta.erase("selfLink");
  if (type.tracks_generation) {
    meta["generation"] = 1;
  } else {
    meta.erase("generation");
  }
  CommitLocked(type, nullptr, std::move(object), out);
  out->created = true;
  if (options_.collect_dangling_dependents) {
    const json created = out->object;
    CollectIfOrphanedLocked(type, created);
  }
  return ApiError();
}

ApiError ObjectStore::Update(const ResourceType& type, const std::string& ns,
                             const std::string& name, bool create_if_absent,
                             const Mutation& mutate, WriteResult* out) {
  json next;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ObjectMap& objects = ObjectsOf(type.key());
    auto it = objects.find(ObjectKey(type.namespaced ? ns : "", name));
    if (it == objects.end()) {
      if (!create_if_absent) return ApiError::NotFound(type.group, type.resource, name);
      ApiError error = mutate(nullptr, &next);
      if (!error.ok()) return error;
      if (!next.is_object()) return ApiError::InternalError("a create produced a non-object");
      if (!next["metadata"].is_object()) next["metadata"] = json::object();
      next["metadata"]["name"] = name;
      if (type.namespaced) next["metadata"]["namespace"] = ns;
      return CreateLocked(type, std::move(next), out);
    }
    const json current = it->second;
    ApiError error = mutate(&current, &next);
    if (!error.ok()) return error;
    if (!next.is_object()) return ApiError::InternalError("an update produced a non-object");
    KeepServerOwnedMetadata(current, &next);
    if (type.tracks_generation && SpecPart(current) != SpecPart(next)) {
      next["metadata"]["generation"] = IntField(current, {"metadata", "generation"}) + 1;
    }
    if (next == current) {
      out->object = current;
      out->unchanged = true;
      return ApiError();
    }
    const bool owners_changed = OwnerReferences(current) != OwnerReferences(next);
    CommitLocked(type, &current, std::move(next), out);
    if (owners_changed) {
      // An owner waiting for this dependent may not have to any more.
      for (const json& ref : OwnerReferences(current)) {
        FinishForegroundDeletionLocked(StringField(ref, {"uid"}));
      }
      if (!out->removed && options_.collect_dangling_dependents) {
        CollectIfOrphanedLocked(type, out->object);
      }
    }
  }
  return ApiError();
}

ApiError ObjectStore::Delete(const ResourceType& type, const std::string& ns,
                             const std::string& name, const DeleteOptions& options,
                             WriteResult* out) {
  std::lock_guard<std::mutex> lock(mu_);
  return DeleteLocked(type, ns, name, options, out);
}

ApiError ObjectStore::DeleteLocked(const ResourceType& type, const std::string& ns,
                                   const std::string& name, const DeleteOptions& options,
                                   WriteResult* out) {
  ObjectMap& objects = ObjectsOf(type.key());
  const std::string key = ObjectKey(type.namespaced ? ns : "", name);
  auto it = objects.find(key);
  if (it == objects.end()) return ApiError::NotFound(type.group, type.resource, name);
  const json current = it->second;
  const std::string uid = StringField(current, {"metadata", "uid"});
  if (options.precondition_uid && *options.precondition_uid != uid) {
    return ApiError::Conflict(type.group, type.resource, name,
                              "Precondition failed: UID in precondition: " +
                                  *options.precondition_uid + ", UID in object meta: " + uid);
  }
  const std::string rv = StringField(current, {"metadata", "resourceVersion"});
  if (options.precondition_resource_version && *options.precondition_resource_version != rv) {
    return ApiError::Conflict(
        type.group, type.resource, name,
        "Precondition failed: ResourceVersion in precondition: " +
            *options.precondition_resource_version + ", ResourceVersion in object meta: " + rv);
  }
  const std::string policy =
      options.propagation_policy.empty() ? "Background" : options.propagation_policy;

  int64_t grace = 0;
  if (type.rules == KindRules::kPod) {
    const json& spec = current["spec"];
    grace = 30;
    if (spec.is_object() && spec.contains("terminationGracePeriodSeconds") &&
        spec["terminationGracePeriodSeconds"].is_number_integer()) {
      grace = spec["terminationGracePeriodSeconds"].get<int64_t>();
    }
    if (options.grace_period_seconds) grace = *options.grace_period_seconds;
    const std::string phase = current["status"].is_object()
                                  ? StringField(current, {"status", "phase"})
                                  : "";
    const bool scheduled = spec.is_object() && !StringField(spec, {"nodeName"}).empty();
    if (!scheduled || phase == "Succeeded" || phase == "Failed") grace = 0;
    if (grace < 0) grace = 1;
  }

  if (policy == "Orphan") {
    // What the garbage collector does for the orphan finalizer, done before
    // the owner goes: dependents lose their reference to it.
    std::vector<std::pair<ResourceTypePtr, json>> dependents;
    ForEachObjectLocked([&](const ResourceTypePtr& t, const json& object) {
      for (const json& ref : OwnerReferences(object)) {
        if (StringField(ref, {"uid"}) == uid) {
          dependents.push_back({t, object});
          break;
        }
      }
    });
    for (const auto& [dependent_type, before] : dependents) {
      json after = before;
      json refs = json::array();
      for (const json& ref : OwnerReferences(before)) {
        if (StringField(ref, {"uid"}) != uid) refs.push_back(ref);
      }
      if (refs.empty()) {
        after["metadata"].erase("ownerReferences");
      } else {
        after["metadata"]["ownerReferences"] = refs;
      }
      ForgetMissingManagedFields(&after);
      WriteResult ignored;
      CommitLocked(*dependent_type, &before, std::move(after), &ignored);
    }
  }

  json next = current;
  json finalizers = Finalizers(current);
  bool finalizers_changed = false;
  const bool foreground_started = policy == "Foreground" && !HasFinalizer(current, kForegroundFinalizer);
  if (foreground_started) {
    json kept = json::array();
    for (const json& f : finalizers) {
      if (f != kOrphanFinalizer) kept.push_back(f);
    }
    kept.push_back(kForegroundFinalizer);
    finalizers = kept;
    finalizers_changed = true;
  }
  SetFinalizers(&next, finalizers);

  if (IsBeingDeleted(current)) {
    // A second DELETE may only shorten the grace period or add finalizers.
    bool changed = finalizers_changed;
    if (grace < DeletionGracePeriod(current)) {
      next["metadata"]["deletionGracePeriodSeconds"] = grace;
      next["metadata"]["deletionTimestamp"] = TimestampLocked(grace);
      changed = true;
    }
    if (changed) {
      CommitLocked(type, &current, std::move(next), out);
    } else {
      out->object = current;
      out->unchanged = true;
    }
  } else if (grace == 0 && finalizers.empty()) {
    if (type.rules == KindRules::kPod) {
      next["metadata"]["deletionTimestamp"] = TimestampLocked(0);
      next["metadata"]["deletionGracePeriodSeconds"] = 0;
    }
    RemoveLocked(type, std::move(next), out);
    return ApiError();
  } else {
    json& meta = next["metadata"];
    meta["deletionTimestamp"] = TimestampLocked(grace);
    meta["deletionGracePeriodSeconds"] = grace;
    if (type.tracks_generation && IntField(meta, {"generation"}) > 0) {
      meta["generation"] = meta["generation"].get<int64_t>() + 1;
    }
    CommitLocked(type, &current, std::move(next), out);
  }

  if (foreground_started && !out->removed) {
    const WriteResult as_deleted = *out;
    CollectDependentsLocked(out->object, /*foreground=*/true);
    FinishForegroundDeletionLocked(uid);
    *out = as_deleted;
  }
  return ApiError();
}

void ObjectStore::ForEachObjectLocked(
    const std::function<void(const ResourceTypePtr&, const json&)>& visit) {
  for (const auto& [key, objects] : objects_) {
    if (objects.empty()) continue;
    const ResourceTypePtr type = registry_->FindByName(key);
    if (type == nullptr) continue;
    for (const auto& [object_key, object] : objects) visit(type, object);
  }
}

bool ObjectStore::FindByUidLocked(const std::string& uid, ResourceTypePtr* type, json** object) {
  for (auto& [key, objects] : objects_) {
    for (auto& [object_key, o] : objects) {
      if (StringField(o, {"metadata", "uid"}) != uid) continue;
      *type = registry_->FindByName(key);
      if (*type == nullptr) return false;
      *object = &o;
      return true;
    }
  }
  return false;
}

bool ObjectStore::OwnerExistsLocked(const std::string& ns, const json& reference) const {
  const ResourceTypePtr owner_type =
      registry_->FindByKind(GroupOf(StringField(reference, {"apiVersion"})), StringField(reference, {"kind"}));
  // A kind nobody serves cannot be checked; the real collector leaves the
  // dependent alone too.
  if (owner_type == nullptr) return true;
  auto objects = objects_.find(owner_type->key());
  if (objects == objects_.end()) return false;
  auto it = objects->second.find(
      ObjectKey(owner_type->namespaced ? ns : "", StringField(reference, {"name"})));
  return it != objects->second.end() && StringField(it->second, {"metadata", "uid"}) == StringField(reference, {"uid"});
}

void ObjectStore::CollectDependentsLocked(const json& owner, bool foreground) {
  const std::string owner_uid = StringField(owner, {"metadata", "uid"});
  if (owner_uid.empty()) return;
  struct Dependent {
    ResourceTypePtr type;
    std::string ns;
    std::string name;
  };
  std::vector<Dependent> dependents;
  ForEachObjectLocked([&](const ResourceTypePtr& t, const json& object) {
    for (const json& ref : OwnerReferences(object)) {
      if (StringField(ref, {"uid"}) == owner_uid) {
        dependents.push_back({t, StringField(object, {"metadata", "namespace"}), StringField(object, {"metadata", "name"})});
        break;
      }
    }
  });
  for (const Dependent& d : dependents) {
    ObjectMap& objects = ObjectsOf(d.type->key());
    auto it = objects.find(ObjectKey(d.type->namespaced ? d.ns : "", d.name));
    if (it == objects.end()) continue;  // collected on the way
    const json dependent = it->second;
    // Owners that exist and are not waiting for their dependents to go.
    json solid = json::array();
    bool owner_waits = foreground;
    for (const json& ref : OwnerReferences(dependent)) {
      const std::string ref_uid = StringField(ref, {"uid"});
      if (ref_uid == owner_uid || !OwnerExistsLocked(d.ns, ref)) continue;
      ResourceTypePtr owner_type;
      json* other_owner = nullptr;
      if (FindByUidLocked(ref_uid, &owner_type, &other_owner) && IsBeingDeleted(*other_owner) &&
          HasFinalizer(*other_owner, kForegroundFinalizer)) {
        owner_waits = true;
        continue;
      }
      solid.push_back(ref);
    }
    if (!solid.empty()) {
      json after = dependent;
      after["metadata"]["ownerReferences"] = solid;
      ForgetMissingManagedFields(&after);
      WriteResult ignored;
      CommitLocked(*d.type, &dependent, std::move(after), &ignored);
      continue;
    }
    DeleteOptions options;
    options.propagation_policy = owner_waits ? "Foreground" : "Background";
    WriteResult ignored;
    DeleteLocked(*d.type, d.ns, d.name, options, &ignored);
  }
}

void ObjectStore::ReleaseForegroundOwnersLocked(const json& removed) {
  for (const json& ref : OwnerReferences(removed)) {
    FinishForegroundDeletionLocked(StringField(ref, {"uid"}));
  }
}

void ObjectStore::FinishForegroundDeletionLocked(const std::string& owner_uid) {
  ResourceTypePtr owner_type;
  json* owner = nullptr;
  if (owner_uid.empty() || !FindByUidLocked(owner_uid, &owner_type, &owner)) return;
  if (!IsBeingDeleted(*owner) || !HasFinalizer(*owner, kForegroundFinalizer)) return;
  bool blocked = false;
  ForEachObjectLocked([&](const ResourceTypePtr&, const json& object) {
    for (const json& r : OwnerReferences(object)) {
      if (StringField(r, {"uid"}) == owner_uid && BoolField(r, {"blockOwnerDeletion"}, false)) blocked = true;
    }
  });
  if (blocked) return;
  const json before = *owner;
  json after = before;
  json kept = json::array();
  for (const json& f : Finalizers(before)) {
    if (f != kForegroundFinalizer) kept.push_back(f);
  }
  SetFinalizers(&after, kept);
  WriteResult ignored;
  CommitLocked(*owner_type, &before, std::move(after), &ignored);
}

void ObjectStore::CollectIfOrphanedLocked(const ResourceType& type, const json& object) {
  const json refs = OwnerReferences(object);
  if (refs.empty()) return;
  const std::string ns = StringField(object, {"metadata", "namespace"});
  for (const json& ref : refs) {
    if (OwnerExistsLocked(ns, ref)) return;
  }
  DeleteOptions options;
  WriteResult ignored;
  DeleteLocked(type, ns, StringField(object, {"metadata", "name"}), options, &ignored);
}

ApiError ObjectStore::Get(const ResourceType& type, const std::string& ns,
                          const std::string& name, json* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto objects = objects_.find(type.key());
  if (objects != objects_.end()) {
    auto it = objects->second.find(ObjectKey(type.namespaced ? ns : "", name));
    if (it != objects->second.end()) {
      *out = it->second;
      (*out)["apiVersion"] = type.api_version();
      return ApiError();
    }
  }
  return ApiError::NotFound(type.group, type.resource, name);
}

ApiError ObjectStore::List(const ResourceType& type, const ListOptions& options, ListResult* out) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<json> items;
  bool selected = !options.labels.empty() || !options.fields.empty();
  if (!options.continue_token.empty()) {
    std::string decoded;
    long offset = 0;
    if (!Base64Decode(options.continue_token, &decoded, &offset)) {
      return ApiError::BadRequest("continue key is not valid: illegal base64 data at input byte " +
                                  std::to_string(offset));
    }
    const json token = json::parse(decoded, nullptr, false);
    if (!token.is_object() || StringField(token, {"v"}) != kContinueVersion ||
        !token.contains("id") || !token["id"].is_number_unsigned()) {
      return ApiError::BadRequest("continue key is not valid: incorrect encoded start "
                                  "resourceVersion (version " + std::string(kContinueVersion) + ")");
    }
    auto snapshot = snapshots_.find(token["id"].get<uint64_t>());
    if (snapshot == snapshots_.end()) {
      return ApiError::Expired(
          "The provided continue parameter is too old to display a consistent list result. You "
          "can start a new list without the continue parameter, or use the continue token in "
          "this response to retrieve the remainder of the results. Continuing with the provided "
          "token results in an inconsistent list - objects that were created, modified, or "
          "deleted between the time the first chunk was returned and now may show up in the "
          "list.");
    }
    if (snapshot->second.resource_key != type.key()) {
      return ApiError::BadRequest("continue key is not valid: it belongs to another resource");
    }
    items = snapshot->second.items;
    selected = snapshot->second.selected;
    out->resource_version = snapshot->second.resource_version;
  } else {
    out->resource_version = resource_version_;
    auto objects = objects_.find(type.key());
    if (objects != objects_.end()) {
      for (const auto& [key, object] : objects->second) {
        if (!options.ns.empty() && StringField(object, {"metadata", "namespace"}) != options.ns) continue;
        const json* labels = FindField(object, {"metadata", "labels"});
        if (!options.labels.Matches(labels != nullptr ? *labels : json())) continue;
        if (!options.fields.Matches([&](const std::string& field) {
              std::string value;
              SelectableField(type, object, field, &value);
              return value;
            })) {
          continue;
        }
        items.push_back(object);
      }
    }
  }
  out->items.clear();
  out->continue_token.clear();
  out->remaining_item_count.reset();
  if (options.limit > 0 && static_cast<int64_t>(items.size()) > options.limit) {
    Snapshot rest;
    rest.resource_key = type.key();
    rest.resource_version = out->resource_version;
    rest.selected = selected;
    rest.items.assign(items.begin() + options.limit, items.end());
    items.resize(static_cast<size_t>(options.limit));
    const uint64_t id = next_snapshot_++;
    const std::string start = StringField(rest.items.front(), {"metadata", "name"});
    json token = {{"v", kContinueVersion},
                  {"rv", out->resource_version},
                  {"start", start + std::string(1, '\0')},
                  {"id", id}};
    out->continue_token = Base64Encode(token.dump());
    if (!selected) out->remaining_item_count = static_cast<int64_t>(rest.items.size());
    snapshots_[id] = std::move(rest);
    while (snapshots_.size() > kMaxSnapshots) snapshots_.erase(snapshots_.begin());
  }
  for (json& item : items) {
    item["apiVersion"] = type.api_version();
    out->items.push_back(std::move(item));
  }
  return ApiError();
}

ApiError ObjectStore::StartWatch(const ResourceType& type, const std::string& ns,
                                 LabelSelector labels, FieldSelector fields,
                                 const std::string& resource_version,
                                 std::unique_ptr<Watch>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  ResourceTypePtr type_ptr = std::make_shared<ResourceType>(type);
  if (resource_version.empty() || resource_version == "0") {
    std::unique_ptr<Watch> watch(new Watch(this, type_ptr, ns, std::move(labels),
                                           std::move(fields), resource_version_, watch_epoch_));
    auto objects = objects_.find(type.key());
    if (objects != objects_.end()) {
      for (const auto& [key, object] : objects->second) {
        if (!watch->Matches(object)) continue;
        json copy = object;
        copy["apiVersion"] = type.api_version();
        watch->initial_.push_back({"ADDED", std::move(copy)});
      }
    }
    *out = std::move(watch);
    return ApiError();
  }
  uint64_t from = 0;
  try {
    size_t used = 0;
    from = std::stoull(resource_version, &used);
    if (used != resource_version.size()) throw std::invalid_argument(resource_version);
  } catch (const std::exception&) {
    return ApiError::BadRequest("resourceVersion: Invalid value: " + json(resource_version).dump() +
                                ": must be a valid resource version");
  }
  if (from > resource_version_) {
    return ApiError::TooLargeResourceVersion(from, resource_version_);
  }
  out->reset(new Watch(this, type_ptr, ns, std::move(labels), std::move(fields), from,
                       watch_epoch_));
  return ApiError();
}

bool ObjectStore::Watch::Matches(const json& object) const {
  if (!ns_.empty() && StringField(object, {"metadata", "namespace"}) != ns_) return false;
  const json* labels = FindField(object, {"metadata", "labels"});
  if (!labels_.Matches(labels != nullptr ? *labels : json())) return false;
  return fields_.Matches([&](const std::string& field) {
    std::string value;
    SelectableField(*type_, object, field, &value);
    return value;
  });
}

bool ObjectStore::Watch::Translate(const StoredEvent& stored, WatchEvent* event) const {
  const bool now_matches = Matches(stored.object);
  if (stored.type == "ADDED" || stored.type == "DELETED") {
    if (!now_matches) return false;
    event->type = stored.type;
  } else {
    const bool matched = Matches(stored.previous);
    if (matched && now_matches) {
      event->type = "MODIFIED";
    } else if (now_matches) {
      event->type = "ADDED";
    } else if (matched) {
      event->type = "DELETED";
    } else {
      return false;
    }
  }
  event->object = stored.object;
  event->object["apiVersion"] = type_->api_version();
  event->encoded_object.clear();
  return true;
}

ObjectStore::Watch::Result ObjectStore::Watch::Next(std::chrono::steady_clock::time_point deadline,
                                                    WatchEvent* event) {
  std::unique_lock<std::mutex> lock(store_->mu_);
  for (;;) {
    if (failed_ || store_->shut_down_ || epoch_ != store_->watch_epoch_) return Result::kClosed;
    if (!initial_.empty()) {
      *event = std::move(initial_.front());
      initial_.pop_front();
      return Result::kEvent;
    }
    const History& history = store_->histories_[type_->key()];
    const uint64_t oldest = std::max(history.oldest_servable, store_->history_floor_);
    if (cursor_ < oldest) {
      failed_ = true;
      const ApiError expired = ApiError::TooOldResourceVersion(cursor_, oldest);
      event->type = "ERROR";
      event->object = json::parse(expired.ToJsonText());
      event->encoded_object = expired.ToJsonText();
      return Result::kEvent;
    }
    auto it = std::upper_bound(history.events.begin(), history.events.end(), cursor_,
                               [](uint64_t rv, const StoredEvent& e) {
                                 return rv < e.resource_version;
                               });
    for (; it != history.events.end(); ++it) {
      cursor_ = it->resource_version;
      if (Translate(*it, event)) return Result::kEvent;
    }
    if (std::chrono::steady_clock::now() >= deadline) return Result::kTimeout;
    store_->changed_.wait_until(lock, deadline);
  }
}

bool ObjectStore::Watch::Bookmark(WatchEvent* event) {
  std::lock_guard<std::mutex> lock(store_->mu_);
  if (failed_ || !initial_.empty()) return false;
  const History& history = store_->histories_[type_->key()];
  if (!history.events.empty() && history.events.back().resource_version > cursor_) return false;
  cursor_ = std::max(cursor_, store_->resource_version_);
  event->type = "BOOKMARK";
  event->encoded_object.clear();
  event->object = {{"apiVersion", type_->api_version()},
                   {"kind", type_->kind},
                   {"metadata", {{"resourceVersion", std::to_string(cursor_)}}}};
  return true;
}

bool ObjectStore::WaitUntil(const std::function<bool(const StoreView&)>& predicate,
                            std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  View view(this);
  while (!predicate(view)) {
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) return predicate(view);
  }
  return true;
}

void ObjectStore::ExpireWatchHistory() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, history] : histories_) history.events.clear();
  history_floor_ = resource_version_;
  changed_.notify_all();
}

void ObjectStore::CloseAllWatches() {
  std::lock_guard<std::mutex> lock(mu_);
  ++watch_epoch_;
  changed_.notify_all();
}

void ObjectStore::WakeWatchers() {
  std::lock_guard<std::mutex> lock(mu_);
  changed_.notify_all();
}

void ObjectStore::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  shut_down_ = true;
  changed_.notify_all();
}

}  // namespace kube_testing
}  // namespace gaptrain
