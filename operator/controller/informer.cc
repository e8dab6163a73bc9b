#include "operator/controller/informer.h"

#include <utility>

#include "operator/controller/object_key.h"

namespace gaptrain {
namespace controller {

namespace {

std::string WatchedNamespace(const kube::Client* client, const kube::Resource& resource,
                             const std::string& ns) {
  if (!resource.namespaced) return "";
  return ns.empty() ? client->default_namespace() : ns;
}

// Whether a re-listed object differs from the cached one.
bool Changed(const nlohmann::json& cached, const nlohmann::json& listed) {
  const std::string a = ObjectResourceVersion(cached);
  const std::string b = ObjectResourceVersion(listed);
  if (a.empty() || b.empty()) return cached != listed;
  return a != b;
}

}  // namespace

Informer::Informer(kube::Client* client, const kube::Resource& resource, std::string ns,
                   Options options)
    : client_(client),
      resource_(resource),
      ns_(WatchedNamespace(client, resource, ns)),
      options_(std::move(options)),
      feed_(this),
      reflector_(client, resource, ns_, options_.reflector, &feed_) {
  for (const std::string& label : options_.index_labels) indexes_[label];
}

Informer::~Informer() { Stop(); }

Status Informer::AddEventHandlers(EventHandlers handlers) {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_ || stopped_) {
    return Status::FailedPrecondition("informer " + resource_.RbacName() +
                                      ": handlers must be added before Start()");
  }
  handlers_.push_back(std::move(handlers));
  return Status::OK();
}

Status Informer::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_ || stopped_) {
    return Status::FailedPrecondition("informer " + resource_.RbacName() +
                                      ": already started or stopped");
  }
  started_ = true;
  thread_ = std::thread([this] { reflector_.Run(); });
  return Status::OK();
}

void Informer::Stop() {
  std::thread thread;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    synced_changed_.notify_all();
    thread = std::move(thread_);
  }
  reflector_.Stop();
  if (thread.joinable()) thread.join();
}

bool Informer::HasSynced() const {
  std::lock_guard<std::mutex> lock(mu_);
  return synced_;
}

bool Informer::WaitForSync(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  synced_changed_.wait_for(lock, timeout, [this] { return synced_ || stopped_; });
  return synced_;
}

bool Informer::Get(const std::string& ns, const std::string& name, nlohmann::json* object) const {
  return GetByKey(MakeKey(ns, name), object);
}

bool Informer::GetByKey(const std::string& key, nlohmann::json* object) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return false;
  if (object != nullptr) *object = *it->second;
  return true;
}

std::vector<nlohmann::json> Informer::List(const std::string& ns) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<nlohmann::json> out;
  for (const auto& [key, object] : objects_) {
    if (ns.empty() || ObjectNamespace(*object) == ns) out.push_back(*object);
  }
  return out;
}

std::vector<nlohmann::json> Informer::ListByLabel(const std::string& ns, const std::string& key,
                                                  const std::string& value) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto index = indexes_.find(key);
  if (index == indexes_.end()) {
    std::vector<nlohmann::json> out;
    for (const auto& [object_key, object] : objects_) {
      bool present = false;
      const std::string label = ObjectLabel(*object, key, &present);
      if (present && label == value && (ns.empty() || ObjectNamespace(*object) == ns)) {
        out.push_back(*object);
      }
    }
    return out;
  }
  if (!ns.empty()) {
    auto keys = index->second.find({ns, value});
    return keys == index->second.end() ? std::vector<nlohmann::json>() : CopiesLocked(keys->second);
  }
  std::set<std::string> keys;
  for (const auto& [ns_value, entry_keys] : index->second) {
    if (ns_value.second == value) keys.insert(entry_keys.begin(), entry_keys.end());
  }
  return CopiesLocked(keys);
}

std::vector<nlohmann::json> Informer::CopiesLocked(const std::set<std::string>& keys) const {
  std::vector<nlohmann::json> out;
  out.reserve(keys.size());
  for (const std::string& key : keys) out.push_back(*objects_.at(key));
  return out;
}

void Informer::Visit(const std::string& ns,
                     const std::function<void(const nlohmann::json& object)>& visit) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, object] : objects_) {
    if (ns.empty() || ObjectNamespace(*object) == ns) visit(*object);
  }
}

std::vector<std::string> Informer::ListKeys() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> keys;
  keys.reserve(objects_.size());
  for (const auto& entry : objects_) keys.push_back(entry.first);
  return keys;
}

Informer::Stats Informer::stats() const {
  Stats stats;
  stats.reflector = reflector_.stats();
  std::lock_guard<std::mutex> lock(mu_);
  stats.objects = objects_.size();
  stats.skipped = skipped_;
  stats.last_skipped = last_skipped_;
  return stats;
}

bool Informer::Prepare(nlohmann::json object, std::string* key, ObjectPtr* prepared) {
  Status s;
  if (resource_.namespaced && object.is_object()) {
    auto metadata = object.find("metadata");
    if (metadata != object.end() && metadata->is_object() && !metadata->contains("namespace")) {
      if (ns_ == kube::kAllNamespaces) {
        s = Status::InvalidArgument("metadata.namespace: missing (watching every namespace)");
      } else {
        (*metadata)["namespace"] = ns_;
      }
    }
  }
  if (s.ok()) s = ObjectKey(object, key);
  if (!s.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    ++skipped_;
    last_skipped_ = Status(s.code(), "informer " + resource_.RbacName() + ": " + s.message());
    return false;
  }
  *prepared = std::make_shared<const nlohmann::json>(std::move(object));
  return true;
}

void Informer::IndexLocked(const std::string& key, const nlohmann::json& object, bool add) {
  const std::string ns = ObjectNamespace(object);
  for (auto& [label_key, index] : indexes_) {
    bool present = false;
    const std::string value = ObjectLabel(object, label_key, &present);
    if (!present) continue;
    if (add) {
      index[{ns, value}].insert(key);
      continue;
    }
    auto entry = index.find({ns, value});
    if (entry == index.end()) continue;
    entry->second.erase(key);
    if (entry->second.empty()) index.erase(entry);
  }
}

void Informer::Feed::OnReplace(std::vector<nlohmann::json> items, const std::string&) {
  informer_->Replace(std::move(items));
}

void Informer::Replace(std::vector<nlohmann::json> items) {
  std::map<std::string, ObjectPtr> fresh;
  for (nlohmann::json& item : items) {
    std::string key;
    ObjectPtr object;
    if (Prepare(std::move(item), &key, &object)) fresh[key] = std::move(object);
  }
  std::vector<Notification> notifications;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, object] : fresh) {
      auto cached = objects_.find(key);
      if (cached == objects_.end()) {
        notifications.push_back({Notification::Type::kAdd, nullptr, object});
      } else if (Changed(*cached->second, *object)) {
        notifications.push_back({Notification::Type::kUpdate, cached->second, object});
      }
    }
    // Deletions last, as client-go's Replace queues its tombstones.
    for (const auto& [key, object] : objects_) {
      if (fresh.count(key) == 0) {
        notifications.push_back({Notification::Type::kDelete, nullptr, object, true});
      }
    }
    objects_ = std::move(fresh);
    for (auto& [label_key, index] : indexes_) index.clear();
    for (const auto& [key, object] : objects_) IndexLocked(key, *object, /*add=*/true);
  }
  Notify(notifications);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (synced_) return;
    synced_ = true;
    synced_changed_.notify_all();
  }
  for (const EventHandlers& h : handlers_) {
    if (h.on_synced) h.on_synced();
  }
}

void Informer::Upsert(const nlohmann::json& event_object) {
  std::string key;
  ObjectPtr object;
  if (!Prepare(event_object, &key, &object)) return;
  Notification notification{Notification::Type::kAdd, nullptr, object};
  {
    std::lock_guard<std::mutex> lock(mu_);
    ObjectPtr& slot = objects_[key];
    if (slot != nullptr) {
      IndexLocked(key, *slot, /*add=*/false);
      notification.type = Notification::Type::kUpdate;
      notification.old_object = slot;
    }
    slot = object;
    IndexLocked(key, *object, /*add=*/true);
  }
  Notify({notification});
}

void Informer::Remove(const nlohmann::json& event_object) {
  std::string key;
  ObjectPtr object;
  if (!Prepare(event_object, &key, &object)) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto cached = objects_.find(key);
    if (cached != objects_.end()) {
      IndexLocked(key, *cached->second, /*add=*/false);
      objects_.erase(cached);
    }
  }
  Notify({{Notification::Type::kDelete, nullptr, object, false}});
}

void Informer::Notify(const std::vector<Notification>& notifications) {
  // handlers_ no longer changes once started, and only this thread runs
  // Notify, so it is read without the lock.
  for (const Notification& n : notifications) {
    for (const EventHandlers& h : handlers_) {
      switch (n.type) {
        case Notification::Type::kAdd:
          if (h.on_add) h.on_add(*n.object);
          break;
        case Notification::Type::kUpdate:
          if (h.on_update) h.on_update(*n.old_object, *n.object);
          break;
        case Notification::Type::kDelete:
          if (h.on_delete) h.on_delete(*n.object, n.final_state_unknown);
          break;
      }
    }
  }
}

}  // namespace controller
}  // namespace gaptrain
