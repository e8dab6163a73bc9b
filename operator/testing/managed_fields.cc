#include "operator/testing/managed_fields.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

namespace gaptrain {
namespace kube_testing {

using nlohmann::json;

namespace {

// The metadata fields a manager can own; the others belong to the server.
bool IsOwnableMetadataField(const std::string& name) {
  return name == "labels" || name == "annotations" || name == "ownerReferences" ||
         name == "finalizers" || name == "generateName";
}

bool IsExcluded(const std::vector<std::string>& names) {
  if (names.size() == 1) return names[0] == "apiVersion" || names[0] == "kind";
  if (names.size() == 2 && names[0] == "metadata") return !IsOwnableMetadataField(names[1]);
  return false;
}

bool IsFieldToken(const std::string& token) { return token.rfind("f:", 0) == 0; }
bool IsKeyToken(const std::string& token) { return token.rfind("k:", 0) == 0; }

std::string ElementToken(const json& element, const std::vector<std::string>& keys) {
  json key_fields = json::object();
  if (element.is_object()) {
    for (const std::string& k : keys) {
      if (element.contains(k)) key_fields[k] = element[k];
    }
  }
  return "k:" + key_fields.dump();
}

// An element matches a key when every key field the key names is equal.
bool ElementMatches(const json& element, const json& key_fields) {
  if (!element.is_object()) return false;
  for (auto it = key_fields.begin(); it != key_fields.end(); ++it) {
    auto found = element.find(it.key());
    if (found == element.end() || *found != it.value()) return false;
  }
  return true;
}

json KeyFieldsOf(const std::string& token) {
  json parsed = json::parse(token.substr(2), nullptr, false);
  return parsed.is_object() ? parsed : json::object();
}

const json* ValueAt(const json& object, const FieldPath& path) {
  const json* current = &object;
  for (const std::string& token : path) {
    if (IsFieldToken(token)) {
      if (!current->is_object()) return nullptr;
      auto it = current->find(token.substr(2));
      if (it == current->end()) return nullptr;
      current = &*it;
    } else if (IsKeyToken(token)) {
      if (!current->is_array()) return nullptr;
      const json key_fields = KeyFieldsOf(token);
      const json* found = nullptr;
      for (const json& element : *current) {
        if (ElementMatches(element, key_fields)) {
          found = &element;
          break;
        }
      }
      if (found == nullptr) return nullptr;
      current = found;
    } else {
      return nullptr;
    }
  }
  return current;
}

// Removes the value at `path`; then parent maps it left empty.
void RemovePath(json* object, const FieldPath& path) {
  if (path.empty()) return;
  std::vector<json*> chain = {object};
  json* current = object;
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    const json* found = ValueAt(*current, {path[i]});
    if (found == nullptr) return;
    current = const_cast<json*>(found);
    chain.push_back(current);
  }
  const std::string& last = path.back();
  if (IsFieldToken(last)) {
    if (!current->is_object()) return;
    current->erase(last.substr(2));
  } else if (IsKeyToken(last)) {
    if (!current->is_array()) return;
    const json key_fields = KeyFieldsOf(last);
    for (size_t i = 0; i < current->size(); ++i) {
      if (ElementMatches((*current)[i], key_fields)) {
        current->erase(i);
        break;
      }
    }
  }
  // Maps emptied by the removal go too (never the root or metadata).
  for (size_t i = chain.size() - 1; i >= 1; --i) {
    json* node = chain[i];
    if (!node->is_object() || !node->empty()) break;
    if (i == 1 && path[0] == "f:metadata") break;
    json* parent = chain[i - 1];
    const std::string& token = path[i - 1];
    if (!IsFieldToken(token) || !parent->is_object()) break;
    parent->erase(token.substr(2));
  }
}

struct SetBuilder {
  const ShapeFunction& shape;
  FieldSet* out;

  // Every field of `value` (at `path`); with `maps_own_self`, maps are
  // fields of their own too (Update style).
  void AddSubtree(const json& value, FieldPath* path, std::vector<std::string>* names,
                  bool maps_own_self) {
    const FieldShape s = shape(*names);
    if (value.is_object() && !s.atomic && !value.empty()) {
      if (maps_own_self && !path->empty()) out->insert(*path);
      for (auto it = value.begin(); it != value.end(); ++it) {
        names->push_back(it.key());
        if (!IsExcluded(*names)) {
          path->push_back("f:" + it.key());
          AddSubtree(it.value(), path, names, maps_own_self);
          path->pop_back();
        }
        names->pop_back();
      }
    } else if (value.is_array() && !s.atomic && !s.list_keys.empty()) {
      for (const json& element : value) {
        path->push_back(ElementToken(element, s.list_keys));
        out->insert(*path);
        if (!s.atomic_elements && element.is_object()) {
          for (auto it = element.begin(); it != element.end(); ++it) {
            names->push_back(it.key());
            path->push_back("f:" + it.key());
            AddSubtree(it.value(), path, names, maps_own_self);
            path->pop_back();
            names->pop_back();
          }
        }
        path->pop_back();
      }
    } else {
      out->insert(*path);
    }
  }

  // The fields `after` added or changed relative to `before` (null: absent).
  void Diff(const json* before, const json& after, FieldPath* path,
            std::vector<std::string>* names) {
    const FieldShape s = shape(*names);
    const bool is_metadata = names->size() == 1 && (*names)[0] == "metadata";
    if (after.is_object() && !s.atomic && (!after.empty() || is_metadata)) {
      if ((before == nullptr || !before->is_object()) && !is_metadata) {
        AddSubtree(after, path, names, /*maps_own_self=*/true);
        return;
      }
      for (auto it = after.begin(); it != after.end(); ++it) {
        names->push_back(it.key());
        if (!IsExcluded(*names)) {
          path->push_back("f:" + it.key());
          const json* old_child = nullptr;
          if (before != nullptr && before->is_object()) {
            auto found = before->find(it.key());
            if (found != before->end()) old_child = &*found;
          }
          Diff(old_child, it.value(), path, names);
          path->pop_back();
        }
        names->pop_back();
      }
    } else if (after.is_array() && !s.atomic && !s.list_keys.empty()) {
      // A list that was not there at all is a field of its own (one that
      // was null, as typed zero values print empty lists, is not).
      if (before == nullptr) out->insert(*path);
      for (const json& element : after) {
        const std::string token = ElementToken(element, s.list_keys);
        const json* old_element = nullptr;
        if (before != nullptr && before->is_array()) {
          const json key_fields = KeyFieldsOf(token);
          for (const json& candidate : *before) {
            if (ElementMatches(candidate, key_fields)) {
              old_element = &candidate;
              break;
            }
          }
        }
        path->push_back(token);
        if (old_element == nullptr) {
          out->insert(*path);
          if (!s.atomic_elements && element.is_object()) {
            for (auto it = element.begin(); it != element.end(); ++it) {
              names->push_back(it.key());
              path->push_back("f:" + it.key());
              AddSubtree(it.value(), path, names, /*maps_own_self=*/true);
              path->pop_back();
              names->pop_back();
            }
          }
        } else if (s.atomic_elements || !element.is_object()) {
          if (*old_element != element) out->insert(*path);
        } else {
          for (auto it = element.begin(); it != element.end(); ++it) {
            names->push_back(it.key());
            path->push_back("f:" + it.key());
            auto found = old_element->find(it.key());
            Diff(found == old_element->end() ? nullptr : &*found, it.value(), path, names);
            path->pop_back();
            names->pop_back();
          }
        }
        path->pop_back();
      }
    } else if (before == nullptr || *before != after) {
      out->insert(*path);
    }
  }
};

FieldSet ApplySet(const json& applied, const ShapeFunction& shape) {
  FieldSet set;
  SetBuilder builder{shape, &set};
  FieldPath path;
  std::vector<std::string> names;
  if (applied.is_object()) builder.AddSubtree(applied, &path, &names, /*maps_own_self=*/false);
  set.erase(FieldPath{});
  return set;
}

FieldSet ChangedSet(const json& before, const json& after, const ShapeFunction& shape) {
  FieldSet set;
  SetBuilder builder{shape, &set};
  FieldPath path;
  std::vector<std::string> names;
  builder.Diff(&before, after, &path, &names);
  set.erase(FieldPath{});
  return set;
}

json Merge(const json& live, const json& applied, std::vector<std::string>* names,
           const ShapeFunction& shape) {
  const FieldShape s = shape(*names);
  if (applied.is_object() && live.is_object() && !s.atomic) {
    json result = live;
    for (auto it = applied.begin(); it != applied.end(); ++it) {
      names->push_back(it.key());
      auto found = live.find(it.key());
      result[it.key()] =
          found == live.end() ? it.value() : Merge(*found, it.value(), names, shape);
      names->pop_back();
    }
    return result;
  }
  if (applied.is_array() && live.is_array() && !s.atomic && !s.list_keys.empty()) {
    json result = live;
    for (const json& element : applied) {
      const json key_fields = KeyFieldsOf(ElementToken(element, s.list_keys));
      bool merged = false;
      for (json& existing : result) {
        if (ElementMatches(existing, key_fields)) {
          existing = s.atomic_elements ? element : Merge(existing, element, names, shape);
          merged = true;
          break;
        }
      }
      if (!merged) result.push_back(element);
    }
    return result;
  }
  return applied;
}

bool HasPrefix(const FieldPath& path, const FieldPath& prefix) {
  return path.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), path.begin());
}

// True when `set` holds `path` or a field below it.
bool OwnsAtOrBelow(const FieldSet& set, const FieldPath& path) {
  auto it = set.lower_bound(path);
  return it != set.end() && HasPrefix(*it, path);
}

bool HasChildIn(const FieldSet& set, const FieldPath& path) {
  auto it = set.upper_bound(path);
  return it != set.end() && HasPrefix(*it, path);
}

std::string PrintManager(const ManagedFields::Entry& e) {
  std::string s = json(e.manager).dump();
  if (!e.subresource.empty()) s += " with subresource " + json(e.subresource).dump();
  if (e.operation == "Update") {
    s += " using " + e.api_version;
    if (!e.time.empty()) s += " at " + e.time;
  }
  return s;
}

}  // namespace

json EncodeFieldsV1(const FieldSet& fields) {
  json root = json::object();
  for (const FieldPath& path : fields) {
    json* node = &root;
    for (const std::string& token : path) {
      json& child = (*node)[token];
      if (!child.is_object()) child = json::object();
      node = &child;
    }
  }
  for (const FieldPath& path : fields) {
    json* node = &root;
    for (const std::string& token : path) node = &(*node)[token];
    if (!node->empty()) (*node)["."] = json::object();
  }
  return root;
}

Status DecodeFieldsV1(const json& fields_v1, FieldSet* out) {
  out->clear();
  if (fields_v1.is_null()) return Status::OK();
  if (!fields_v1.is_object()) return Status::InvalidArgument("fieldsV1 must be an object");
  std::vector<std::pair<const json*, FieldPath>> stack = {{&fields_v1, {}}};
  while (!stack.empty()) {
    auto [node, path] = stack.back();
    stack.pop_back();
    for (auto it = node->begin(); it != node->end(); ++it) {
      const std::string& token = it.key();
      if (!it.value().is_object()) {
        return Status::InvalidArgument("fieldsV1 entry \"" + token + "\" must be an object");
      }
      if (token == ".") {
        if (!path.empty()) out->insert(path);
        continue;
      }
      if (token.size() < 2 || token[1] != ':' ||
          (token[0] != 'f' && token[0] != 'k' && token[0] != 'v' && token[0] != 'i')) {
        return Status::InvalidArgument("fieldsV1 key \"" + token +
                                       "\" is not of the form f:, k:, v: or i:");
      }
      FieldPath child = path;
      child.push_back(token);
      if (it.value().empty()) {
        out->insert(child);
      } else {
        stack.push_back({&it.value(), child});
      }
    }
  }
  return Status::OK();
}

std::string FieldPathString(const FieldPath& path) {
  std::string s;
  for (const std::string& token : path) {
    if (IsFieldToken(token)) {
      s += "." + token.substr(2);
    } else if (IsKeyToken(token)) {
      const json key_fields = KeyFieldsOf(token);
      s += "[";
      bool first = true;
      for (auto it = key_fields.begin(); it != key_fields.end(); ++it) {
        if (!first) s += ",";
        first = false;
        s += it.key() + "=" + it.value().dump();
      }
      s += "]";
    } else if (token.rfind("v:", 0) == 0) {
      s += "[=" + token.substr(2) + "]";
    } else if (token.rfind("i:", 0) == 0) {
      s += "[" + token.substr(2) + "]";
    }
  }
  return s;
}

Status ManagedFields::Decode(const json& managed_fields, ManagedFields* out) {
  out->entries_.clear();
  if (managed_fields.is_null()) return Status::OK();
  if (!managed_fields.is_array()) {
    return Status::InvalidArgument("metadata.managedFields must be a list");
  }
  for (size_t i = 0; i < managed_fields.size(); ++i) {
    const json& j = managed_fields[i];
    const std::string where = "metadata.managedFields[" + std::to_string(i) + "]";
    if (!j.is_object()) return Status::InvalidArgument(where + " must be an object");
    Entry e;
    for (auto [key, target] : {std::pair<const char*, std::string*>{"manager", &e.manager},
                               {"operation", &e.operation},
                               {"apiVersion", &e.api_version},
                               {"time", &e.time},
                               {"subresource", &e.subresource}}) {
      if (!j.contains(key) || j[key].is_null()) continue;
      if (!j[key].is_string()) return Status::InvalidArgument(where + "." + key + " must be a string");
      *target = j[key].get<std::string>();
    }
    if (e.operation != "Apply" && e.operation != "Update") {
      return Status::InvalidArgument(where + ".operation must be Apply or Update");
    }
    Status s = DecodeFieldsV1(j.contains("fieldsV1") ? j["fieldsV1"] : json(), &e.fields);
    if (!s.ok()) return Status::InvalidArgument(where + "." + s.message());
    out->entries_.push_back(std::move(e));
  }
  return Status::OK();
}

json ManagedFields::Encode() const {
  std::vector<const Entry*> sorted;
  for (const Entry& e : entries_) sorted.push_back(&e);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Entry* a, const Entry* b) {
    return std::tie(a->operation, a->time, a->manager, a->subresource) <
           std::tie(b->operation, b->time, b->manager, b->subresource);
  });
  json out = json::array();
  for (const Entry* e : sorted) {
    json j;
    j["manager"] = e->manager;
    j["operation"] = e->operation;
    j["apiVersion"] = e->api_version;
    j["time"] = e->time;
    j["fieldsType"] = "FieldsV1";
    j["fieldsV1"] = EncodeFieldsV1(e->fields);
    if (!e->subresource.empty()) j["subresource"] = e->subresource;
    out.push_back(std::move(j));
  }
  return out;
}

ManagedFields::Entry* ManagedFields::Find(const std::string& manager, const std::string& operation,
                                          const std::string& subresource) {
  for (Entry& e : entries_) {
    if (e.manager == manager && e.operation == operation && e.subresource == subresource) return &e;
  }
  return nullptr;
}

void ManagedFields::RecordUpdate(const std::string& manager, const std::string& subresource,
                                 const std::string& api_version, const std::string& now,
                                 const json& before, const json& after,
                                 const ShapeFunction& shape) {
  const FieldSet changed = ChangedSet(before, after, shape);
  for (Entry& e : entries_) {
    if (e.manager == manager && e.operation == "Update" && e.subresource == subresource) continue;
    for (const FieldPath& p : changed) e.fields.erase(p);
  }
  Entry* mine = Find(manager, "Update", subresource);
  if (mine == nullptr && !changed.empty()) {
    entries_.push_back(Entry{manager, "Update", api_version, now, subresource, {}});
    mine = &entries_.back();
  }
  if (mine != nullptr) {
    mine->fields.insert(changed.begin(), changed.end());
    mine->time = now;
    mine->api_version = api_version;
  }
  ForgetMissingFields(after);
}

ApiError ManagedFields::Apply(const std::string& manager, bool force,
                              const std::string& subresource, const std::string& api_version,
                              const std::string& now, const json& live, const json& applied,
                              const ShapeFunction& shape, json* merged) {
  const FieldSet applied_set = ApplySet(applied, shape);

  struct Conflict {
    Entry* owner;
    FieldPath path;
  };
  std::vector<Conflict> conflicts;
  for (const FieldPath& p : applied_set) {
    if (HasChildIn(applied_set, p)) continue;  // only values conflict
    const json* applied_value = ValueAt(applied, p);
    const json* live_value = ValueAt(live, p);
    if (applied_value == nullptr) continue;
    if (live_value != nullptr && *live_value == *applied_value) continue;
    for (Entry& e : entries_) {
      if (e.manager != manager && e.fields.count(p)) conflicts.push_back({&e, p});
    }
  }
  if (!conflicts.empty() && !force) {
    std::vector<StatusCause> causes;
    for (const Conflict& c : conflicts) {
      causes.push_back({"FieldManagerConflict", "conflict with " + PrintManager(*c.owner),
                        FieldPathString(c.path)});
    }
    std::string message;
    if (conflicts.size() == 1) {
      message = "Apply failed with 1 conflict: conflict with " +
                PrintManager(*conflicts[0].owner) + ": " + FieldPathString(conflicts[0].path);
    } else {
      std::map<std::string, std::vector<std::string>> by_manager;
      for (const Conflict& c : conflicts) {
        by_manager[PrintManager(*c.owner)].push_back(FieldPathString(c.path));
      }
      message = "Apply failed with " + std::to_string(conflicts.size()) + " conflicts: ";
      bool first = true;
      for (const auto& [owner, paths] : by_manager) {
        if (!first) message += "\n";
        first = false;
        message += "conflicts with " + owner + ":";
        for (const std::string& p : paths) message += "\n- " + p;
      }
    }
    return ApiError::ApplyConflict(std::move(causes), message);
  }
  for (const Conflict& c : conflicts) c.owner->fields.erase(c.path);

  std::vector<std::string> names;
  *merged = Merge(live.is_object() ? live : json::object(), applied, &names, shape);

  Entry* mine = Find(manager, "Apply", subresource);
  if (mine != nullptr) {
    std::vector<FieldPath> dropped;
    for (const FieldPath& p : mine->fields) {
      if (applied_set.count(p)) continue;
      bool owned_elsewhere = false;
      for (const Entry& e : entries_) {
        if (&e != mine && OwnsAtOrBelow(e.fields, p)) owned_elsewhere = true;
      }
      if (!owned_elsewhere) dropped.push_back(p);
    }
    // Deepest first, so that emptied parents are cleaned up once.
    std::sort(dropped.begin(), dropped.end(),
              [](const FieldPath& a, const FieldPath& b) { return a.size() > b.size(); });
    for (const FieldPath& p : dropped) RemovePath(merged, p);
  } else {
    entries_.push_back(Entry{manager, "Apply", api_version, now, subresource, {}});
    mine = &entries_.back();
  }
  mine->fields = applied_set;
  mine->time = now;
  mine->api_version = api_version;
  return ApiError();
}

void ManagedFields::ForgetSubresource(const std::string& subresource) {
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                [&](const Entry& e) { return e.subresource == subresource; }),
                 entries_.end());
}

void ManagedFields::ForgetMissingFields(const json& object) {
  for (Entry& e : entries_) {
    for (auto it = e.fields.begin(); it != e.fields.end();) {
      if (ValueAt(object, *it) == nullptr) {
        it = e.fields.erase(it);
      } else {
        ++it;
      }
    }
  }
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                [](const Entry& e) { return e.fields.empty(); }),
                 entries_.end());
}

bool ManagedFields::SameOwnership(const ManagedFields& other) const {
  if (entries_.size() != other.entries_.size()) return false;
  for (const Entry& e : entries_) {
    bool found = false;
    for (const Entry& o : other.entries_) {
      if (o.manager == e.manager && o.operation == e.operation &&
          o.subresource == e.subresource && o.api_version == e.api_version &&
          o.fields == e.fields) {
        found = true;
      }
    }
    if (!found) return false;
  }
  return true;
}

}  // namespace kube_testing
}  // namespace gaptrain
