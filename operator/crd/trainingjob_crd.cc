#include "operator/crd/trainingjob_crd.h"

#include <algorithm>
#include <cmath>

#include "operator/trainingjob/job_status.h"
#include "services/api/job_fields.h"
#include "services/api/training_job.h"
#include "services/api/yaml_text.h"

namespace gaptrain {
namespace {

using Json = nlohmann::ordered_json;

Json Typed(const char* type, const char* description) {
  return Json{{"description", description}, {"type", type}};
}

Json DefaultOf(const FieldDefault& value) {
  if (const auto* s = std::get_if<std::string>(&value)) return *s;
  if (const auto* b = std::get_if<bool>(&value)) return *b;
  if (const auto* i = std::get_if<uint64_t>(&value)) return *i;
  if (const auto* d = std::get_if<double>(&value)) return *d;
  if (const auto* list = std::get_if<std::vector<double>>(&value)) return *list;
  return nullptr;
}

void AddBounds(const FieldSchema& f, Json* schema) {
  // Integral bounds are written as integers: `type: integer` wants them so.
  auto number = [](double v) -> Json {
    if (std::fabs(v) < 9.0e18 && v == std::floor(v)) return static_cast<int64_t>(v);
    return v;
  };
  if (f.minimum.set) {
    (*schema)["minimum"] = number(f.minimum.value);
    if (f.minimum.exclusive) (*schema)["exclusiveMinimum"] = true;
  }
  if (f.maximum.set) {
    (*schema)["maximum"] = number(f.maximum.value);
    if (f.maximum.exclusive) (*schema)["exclusiveMaximum"] = true;
  }
}

std::string Describe(const FieldSchema& f) {
  if (f.limit_reason.empty()) return f.description;
  return f.description + " (at most " + FormatNumber(f.maximum.value) + ": " + f.limit_reason +
         ")";
}

// `with_default`: an absent section becomes {}, so its fields' defaults are
// stored too and `kubectl get -o yaml` shows every value the job runs with.
Json SectionSchema(const FieldSection& section, const std::string& description,
                   bool with_default);

Json FieldProperty(const FieldSchema& f) {
  if (f.type == FieldType::kSection) return SectionSchema(*f.section, f.description, !f.required);
  Json schema{{"description", Describe(f)}, {"type", OpenApiTypeName(f.type)}};
  if (!f.choices.empty()) schema["enum"] = f.choices;
  const Json default_value = DefaultOf(f.default_value);
  if (!default_value.is_null()) schema["default"] = default_value;
  switch (f.type) {
    case FieldType::kString:
      if (f.required || f.non_empty) schema["minLength"] = 1;
      if (f.max_length > 0) schema["maxLength"] = f.max_length;
      if (!f.pattern.empty()) schema["pattern"] = f.pattern;
      break;
    case FieldType::kInteger:
    case FieldType::kNumber:
      AddBounds(f, &schema);
      break;
    case FieldType::kNumberList: {
      Json items{{"type", "number"}};
      AddBounds(f, &items);
      schema["items"] = items;
      if (f.max_items > 0) schema["maxItems"] = f.max_items;
      break;
    }
    case FieldType::kStringMap:
      schema["additionalProperties"] = Json{{"type", "string"}};
      break;
    case FieldType::kObject:
      schema["x-kubernetes-preserve-unknown-fields"] = true;
      break;
    case FieldType::kBoolean:
    case FieldType::kSection:
      break;
  }
  return schema;
}

Json SectionSchema(const FieldSection& section, const std::string& description,
                   bool with_default) {
  Json properties = Json::object();
  Json required = Json::array();
  for (const JobField& field : section.fields()) {
    const FieldSchema& f = field.schema();
    properties[f.name] = FieldProperty(f);
    if (f.required) required.push_back(f.name);
  }
  Json schema{{"description", description}, {"type", "object"}};
  if (with_default) schema["default"] = Json::object();
  schema["properties"] = properties;
  if (!required.empty()) schema["required"] = required;
  return schema;
}

// metadata at the root may only restrict name (and generateName), with no
// description: the API server rejects anything else.
Json MetadataSchema() {
  for (const JobField& field : MetadataFields().fields()) {
    const FieldSchema& f = field.schema();
    if (f.name != "name") continue;
    Json name{{"type", "string"}, {"maxLength", f.max_length}, {"pattern", f.pattern}};
    return Json{{"type", "object"}, {"properties", {{"name", name}}}};
  }
  return Json{{"type", "object"}};
}

// The node at dotted `path` ("" is the root) of a schema built above.
Json& SchemaNode(Json& root, const std::string& path) {
  Json* node = &root;
  size_t begin = 0;
  while (begin < path.size()) {
    const size_t end = std::min(path.find('.', begin), path.size());
    node = &(*node)["properties"][path.substr(begin, end - begin)];
    begin = end + 1;
  }
  return *node;
}

Json Column(const char* name, const char* type, const char* path, const char* description) {
  return Json{{"name", name}, {"type", type}, {"jsonPath", path}, {"description", description}};
}

// A CEL string literal holding `text`.
std::string CelString(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\\' || c == '\'') out += '\\';
    out += c;
  }
  return out + "'";
}

// What the parser adds after a rule's words: literal text, a CEL string
// expression, literal text (", got '", "self", "'").
struct Detail {
  std::string before;
  std::string expression;
  std::string after;
};

// `rule` at schema node `at`, with `job_rule`'s words; fieldPath is the
// part of the rule's field below `at`.
CrdValidationRule Rule(const std::string& at, const std::string& rule, const JobRule& job_rule,
                       const Detail& detail = {}) {
  CrdValidationRule r{at, rule, job_rule.Text(), "", ""};
  if (!detail.expression.empty()) {
    r.message_expression = CelString(r.message + detail.before) + " + " + detail.expression +
                           " + " + CelString(detail.after);
  }
  const std::string path = job_rule.path;
  if (path.size() > at.size() && path.compare(0, at.size() + 1, at + ".") == 0) {
    r.field_path = path.substr(at.size());
  }
  return r;
}

}  // namespace

std::vector<CrdValidationRule> TrainingJobValidationRules() {
  std::string dana;
  for (const char* rule : kDanaRules) {
    dana += (dana.empty() ? "'" : ", '") + std::string(rule) + "'";
  }
  std::string gap_aware;
  for (const char* rule : kGapAwareRules) {
    gap_aware += (gap_aware.empty() ? "'" : ", '") + std::string(rule) + "'";
  }
  // spec.workers' floor, as WorkersSpec::Floor().
  const std::string floor = "(has(self.minReplicas) && self.minReplicas > 0 ? "
                            "self.minReplicas : self.replicas)";
  // Each rule sits on the smallest node that holds every field it reads,
  // and names the field it is about (fieldPath), so the API server's error
  // names that field. The API server applies defaults
  // before it validates a job (an absent section becomes {} and gets its
  // fields' defaults), so a rule may read a defaulted field as it is; but it
  // also checks every default in the schema against the rules there, and a
  // section's default {} has none of its fields. So a rule on a section with
  // a default first asks has() of the field that would break it, whose
  // default never does. A message expression adds what the parser or the
  // operator adds to the words, where the API server can afford it: it
  // refuses `string(int)` in one (its cost estimate of the string is
  // unbounded), so the rules on numbers keep the words alone.
  return {
      // On the name itself, so the error names metadata.name (a rule at the
      // root, which may read self.metadata.name, is reported at "<nil>").
      Rule("metadata.name",
           "self.size() <= " + std::to_string(kMaxClusterJobNameLength) +
               " && self.matches('^[a-z]')",
           kRuleClusterJobName, {", got '", "self", "'"}),
      Rule("spec",
           "self.training.mode != 'sync' || self.training.sync.backupWorkers < "
           "self.workers.replicas",
           kRuleBackupWorkers),
      // A transition rule: checked on updates only. The section's default
      // {} (checked against its rules too) has no shards: 1 then, as the
      // field's default.
      Rule("spec.master",
           "(has(self.shards) ? self.shards : 1) == (has(oldSelf.shards) ? oldSelf.shards : 1)",
           kRuleShardsFixed),
      Rule("spec.data", "!has(self.claimName) || (has(self.path) && self.path.startsWith('/'))",
           kRuleClaimPathAbsolute),
      // format has a default, which the API server applies first.
      Rule("spec.data", "has(self.path) || self.format in ['custom', 'shards']", kRuleDataPath),
      Rule("spec.data", "(self.format in ['custom', 'shards']) == has(self.trainSamples)",
           kRuleCustomDataSize),
      Rule("spec.data", "(self.format == 'shards') == has(self.shards)", kRuleShardCount),
      // The model section's default {} has no fromTrainer.
      Rule("spec",
           "!(self.data.format in ['custom', 'shards']) || (has(self.model.fromTrainer) && "
           "self.model.fromTrainer)",
           kRuleCustomDataFromTrainer),
      // The section's default {} has neither field.
      Rule("spec.model", "!has(self.fromTrainer) || !self.fromTrainer || !has(self.torchscript)",
           kRuleFromTrainerWithoutTorchscript),
      // The section's default {} has neither, which the rule allows.
      Rule("spec.output", "has(self.claimName) == has(self.path)", kRuleOutputClaimAndPath),
      // Neither has a default: present means set (their minimums exclude 0).
      Rule("spec.training", "has(self.epochs) != has(self.maxUpdates)", kRuleOneLength),
      // The section's default {} has none of its fields, which the rule allows.
      Rule("spec.training.target",
           "!(has(self.metric) || has(self.atLeast) || has(self.atMost)) || "
           "(has(self.metric) && has(self.atLeast) != has(self.atMost))",
           kRuleTargetBound),
      // targetAccuracy's default is 0, none.
      Rule("spec.training",
           "!has(self.target) || !has(self.target.metric) || !has(self.targetAccuracy) || "
           "self.targetAccuracy == 0.0",
           kRuleOneTarget),
      Rule("spec.training",
           "!(self.mode == 'async' && self.optimizer.nesterov && self.staleness.rule in [" +
               dana + "])",
           kRuleNoNesterovWithDana),
      Rule("spec.training.optimizer",
           "!has(self.nesterov) || !self.nesterov || self.momentum > 0.0",
           kRuleNesterovNeedsMomentum),
      // Strictly increasing: sorted, and no value twice. The pairs are why
      // the list has maxItems: the API server refuses a CRD whose rules
      // could cost more than its budget on the largest list allowed.
      Rule("spec.training.optimizer.decay.atFractions",
           "self.isSorted() && self.all(x, self.exists_one(y, y == x))",
           kRuleDecayFractionsIncrease),
      Rule("spec.workers",
           "!has(self.autoscale) || !has(self.autoscale.enabled) || !self.autoscale.enabled || "
           "(has(self.maxReplicas) && self.maxReplicas > " + floor + ")",
           kRuleAutoscaleRange),
      Rule("spec",
           "!has(self.workers.autoscale) || !has(self.workers.autoscale.enabled) || "
           "!self.workers.autoscale.enabled || (self.training.mode == 'async' && "
           "self.training.staleness.rule in [" + gap_aware + "])",
           kRuleAutoscaleGap),
      Rule("spec.workers", "!has(self.minReplicas) || self.minReplicas <= self.replicas",
           kRuleMinReplicas),
      Rule("spec.workers",
           "!has(self.maxReplicas) || self.maxReplicas == 0 || self.maxReplicas >= self.replicas",
           kRuleMaxReplicas),
  };
}

std::vector<std::string> TrainingJobSelectableFields() {
  // At most 8 (the API server's limit), each a string, integer or boolean.
  return {".status.phase",         ".spec.model.builtin",       ".spec.data.claimName",
          ".spec.training.mode",   ".spec.training.staleness.rule",
          ".spec.workers.replicas", ".spec.workers.preemptible", ".spec.runPolicy.suspend"};
}

nlohmann::ordered_json TrainingJobCrd() {
  Json schema{
      {"description", "TrainingJob: asynchronous training on preemptible nodes (gaptrain)"},
      {"type", "object"},
      {"properties",
       {{"apiVersion", Typed("string", "gaptrain.io/v1alpha1")},
        {"kind", Typed("string", "TrainingJob")},
        {"metadata", MetadataSchema()},
        {"spec", SectionSchema(SpecFields(), "the job (docs/trainingjob.md)", false)},
        {"status", trainingjob::JobStatusSchema()}}},
      {"required", {"spec"}}};
  for (const CrdValidationRule& r : TrainingJobValidationRules()) {
    Json validation{{"rule", r.rule}, {"message", r.message}};
    if (!r.message_expression.empty()) validation["messageExpression"] = r.message_expression;
    if (!r.field_path.empty()) validation["fieldPath"] = r.field_path;
    SchemaNode(schema, r.at)["x-kubernetes-validations"].push_back(validation);
  }
  Json selectable = Json::array();
  for (const std::string& path : TrainingJobSelectableFields()) {
    selectable.push_back(Json{{"jsonPath", path}});
  }
  Json version{
      {"name", "v1alpha1"},
      {"served", true},
      {"storage", true},
      {"subresources",
       {{"status", Json::object()},
        {"scale",
         {{"specReplicasPath", ".spec.workers.replicas"},
          {"statusReplicasPath", ".status.workers.active"},
          {"labelSelectorPath", ".status.workers.selector"}}}}},
      {"additionalPrinterColumns",
       {Column("State", "string", ".status.phase", "the job's phase"),
        Column("Workers", "string", ".status.workers.summary", "trainers ready/desired"),
        Column("Epoch", "string", ".status.display.epoch", "epochs done / the job's epochs"),
        Column("Accuracy", "string", ".status.display.accuracy", "latest test accuracy"),
        Column("Target", "string", ".status.display.target",
               "the target metric's latest value and its bound"),
        Column("Gap", "string", ".status.display.gap", "mean gap of recent pushes"),
        Column("Updates/s", "string", ".status.display.updatesPerSecond",
               "master updates per second"),
        Column("Age", "date", ".metadata.creationTimestamp", "since the job was created")}},
      {"selectableFields", selectable},
      {"schema", {{"openAPIV3Schema", schema}}}};
  return Json{
      {"apiVersion", "apiextensions.k8s.io/v1"},
      {"kind", "CustomResourceDefinition"},
      {"metadata", {{"name", "trainingjobs.gaptrain.io"}}},
      {"spec",
       {{"group", "gaptrain.io"},
        {"names",
         {{"kind", "TrainingJob"},
          {"listKind", "TrainingJobList"},
          {"plural", "trainingjobs"},
          {"singular", "trainingjob"},
          {"shortNames", {"tj"}},
          {"categories", {"all"}}}},
        {"scope", "Namespaced"},
        {"versions", Json::array({version})}}}};
}

std::string TrainingJobCrdYaml() {
  return "# Generated by " + std::string(kRegenerateCrdCommand) +
         " from the TrainingJob field tables\n"
         "# (services/api/training_job.h). Do not edit.\n" +
         YamlText(TrainingJobCrd());
}

}  // namespace gaptrain
