#include "operator/crd/trainingjob_crd.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "operator/crd/crd_command.h"
#include "operator/crd/schema_check.h"
#include "services/api/job_fields.h"
#include "services/api/training_job.h"
#include "services/testing/test_files.h"
#include "services/testing/testdata_dir.h"

namespace gaptrain {
namespace {

using Errors = std::vector<std::string>;

YAML::Node Crd() { return YAML::Load(TrainingJobCrdYaml()); }

YAML::Node RootSchema() { return Crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]; }

// The schema of the property at dotted `path` under `schema`; undefined
// when there is none.
YAML::Node SchemaAt(YAML::Node schema, const std::string& path) {
  std::istringstream keys(path);
  std::string key;
  while (std::getline(keys, key, '.')) {
    if (!schema["properties"] || !schema["properties"][key]) return YAML::Node();
    schema.reset(schema["properties"][key]);
  }
  return schema;
}

// Every property path under `schema`, depth first; a list's item fields
// count as the list's own ("status.conditions.type").
void PropertyPaths(const YAML::Node& schema, const std::string& path,
                   std::vector<std::string>* paths) {
  if (schema["items"]) PropertyPaths(schema["items"], path, paths);
  if (!schema["properties"]) return;
  for (const auto& item : schema["properties"]) {
    const std::string child = path.empty() ? item.first.Scalar() : path + "." + item.first.Scalar();
    paths->push_back(child);
    PropertyPaths(item.second, child, paths);
  }
}

// ../shared/k8s/recorded/NAME.json (JSON is YAML).
YAML::Node Recorded(const std::string& name) {
  const std::string path = RecordedK8sExchange(name);
  EXPECT_FALSE(path.empty()) << "../shared/k8s not found: " << SharedDataDir();
  return path.empty() ? YAML::Node() : YAML::LoadFile(path);
}

std::string FirstDifference(const std::string& a, const std::string& b) {
  std::istringstream x(a), y(b);
  std::string line_a, line_b;
  for (int line = 1;; ++line) {
    const bool more_a = static_cast<bool>(std::getline(x, line_a));
    const bool more_b = static_cast<bool>(std::getline(y, line_b));
    if (!more_a && !more_b) return "";
    if (line_a != line_b || more_a != more_b) {
      return "line " + std::to_string(line) + ": committed '" + (more_a ? line_a : "<end>") +
             "', generated '" + (more_b ? line_b : "<end>") + "'";
    }
  }
}

TEST(TrainingJobCrdTest, TheCommittedFileIsTheGeneratorsOutput) {
  const std::string committed = ReadRaw(kTrainingJobCrdPath);
  const std::string generated = TrainingJobCrdYaml();
  EXPECT_EQ(generated, TrainingJobCrdYaml()) << "the output must be deterministic";
  ASSERT_FALSE(committed.empty()) << "cannot read " << kTrainingJobCrdPath;
  EXPECT_TRUE(committed == generated)
      << kTrainingJobCrdPath << " is not what the field tables generate ("
      << FirstDifference(committed, generated) << "); run " << kRegenerateCrdCommand;
}

TEST(TrainingJobCrdTest, CrdCommandPrintsOrWritesIt) {
  std::string out, err;
  EXPECT_EQ(CrdCommand({}, &out, &err), 0) << err;
  EXPECT_EQ(out, TrainingJobCrdYaml());
  const std::string file = TestDir("crd") + "/crd.yaml";
  out.clear();
  EXPECT_EQ(CrdCommand({"-o", file}, &out, &err), 0) << err;
  EXPECT_EQ(out, "");
  EXPECT_EQ(ReadRaw(file), TrainingJobCrdYaml());
  EXPECT_EQ(CrdCommand({"--bogus"}, &out, &err), 2);
  EXPECT_NE(err.find("--bogus"), std::string::npos) << err;
  err.clear();
  EXPECT_EQ(CrdCommand({"-o", "/nonexistent/dir/crd.yaml"}, &out, &err), 1);
  EXPECT_NE(err.find("/nonexistent/dir/crd.yaml"), std::string::npos) << err;
}

TEST(TrainingJobCrdTest, NamesScopeVersionAndSubresources) {
  const YAML::Node crd = Crd();
  EXPECT_EQ(crd["apiVersion"].Scalar(), "apiextensions.k8s.io/v1");
  EXPECT_EQ(crd["kind"].Scalar(), "CustomResourceDefinition");
  EXPECT_EQ(crd["metadata"]["name"].Scalar(), "trainingjobs.gaptrain.io");
  const YAML::Node spec = crd["spec"];
  EXPECT_EQ(spec["group"].Scalar(), "gaptrain.io");
  EXPECT_EQ(spec["scope"].Scalar(), "Namespaced");
  const YAML::Node names = spec["names"];
  EXPECT_EQ(names["kind"].Scalar(), "TrainingJob");
  EXPECT_EQ(names["listKind"].Scalar(), "TrainingJobList");
  EXPECT_EQ(names["plural"].Scalar(), "trainingjobs");
  EXPECT_EQ(names["singular"].Scalar(), "trainingjob");
  EXPECT_EQ(names["shortNames"].as<std::vector<std::string>>(), std::vector<std::string>{"tj"});
  EXPECT_EQ(names["categories"].as<std::vector<std::string>>(), std::vector<std::string>{"all"});
  ASSERT_EQ(spec["versions"].size(), 1u);
  const YAML::Node version = spec["versions"][0];
  EXPECT_EQ(version["name"].Scalar(), "v1alpha1");
  EXPECT_TRUE(version["served"].as<bool>());
  EXPECT_TRUE(version["storage"].as<bool>());
  EXPECT_TRUE(version["subresources"]["status"].IsMap());
  const YAML::Node scale = version["subresources"]["scale"];
  EXPECT_EQ(scale["specReplicasPath"].Scalar(), ".spec.workers.replicas");
  EXPECT_EQ(scale["statusReplicasPath"].Scalar(), ".status.workers.active");
  EXPECT_EQ(scale["labelSelectorPath"].Scalar(), ".status.workers.selector");
  std::vector<std::string> columns;
  for (const YAML::Node& c : version["additionalPrinterColumns"]) {
    columns.push_back(c["name"].Scalar() + " " + c["type"].Scalar() + " " + c["jsonPath"].Scalar());
  }
  // The progress as people read it (status.display, strings the operator
  // formats), not the numbers of status.progress.
  EXPECT_EQ(columns, (std::vector<std::string>{
                         "State string .status.phase", "Workers string .status.workers.summary",
                         "Epoch string .status.display.epoch",
                         "Accuracy string .status.display.accuracy",
                         "Target string .status.display.target",
                         "Gap string .status.display.gap",
                         "Updates/s string .status.display.updatesPerSecond",
                         "Age date .metadata.creationTimestamp"}));
}

TEST(TrainingJobCrdTest, PrinterColumnsAndScalePathsExistInTheSchema) {
  const YAML::Node root = RootSchema();
  const YAML::Node version = Crd()["spec"]["versions"][0];
  const std::map<std::string, std::string> column_types = {
      {"string", "string"}, {"number", "number"}, {"integer", "integer"}};
  for (const YAML::Node& column : version["additionalPrinterColumns"]) {
    const std::string path = column["jsonPath"].Scalar().substr(1);
    if (path == "metadata.creationTimestamp") continue;  // ObjectMeta, not in the schema
    const YAML::Node field = SchemaAt(root, path);
    ASSERT_TRUE(field.IsDefined()) << path << " is not in the schema";
    EXPECT_EQ(field["type"].Scalar(), column_types.at(column["type"].Scalar())) << path;
  }
  const YAML::Node scale = version["subresources"]["scale"];
  const std::pair<const char*, const char*> paths[] = {{"specReplicasPath", "integer"},
                                                       {"statusReplicasPath", "integer"},
                                                       {"labelSelectorPath", "string"}};
  for (const auto& [key, type] : paths) {
    const std::string path = scale[key].Scalar().substr(1);
    const YAML::Node field = SchemaAt(root, path);
    ASSERT_TRUE(field.IsDefined()) << key << ": " << path << " is not in the schema";
    EXPECT_EQ(field["type"].Scalar(), type) << path;
  }
}

TEST(TrainingJobCrdTest, TheSchemaIsStructural) {
  EXPECT_EQ(StructuralProblems(RootSchema()), Errors{});
  // Every property has a type or preserves unknown fields (what
  // StructuralProblems checks), and the checker knows every keyword used.
  EXPECT_EQ(CheckAgainstSchema(RootSchema(), YAML::Load("{spec: {}}")),
            (Errors{"spec.data: Required value", "spec.training: Required value"}));
}

TEST(TrainingJobCrdTest, EveryRuleBetweenFieldsIsACelRuleWithTheParsersMessage) {
  const JobRule rules[] = {kRuleOneLength,          kRuleNesterovNeedsMomentum,
                           kRuleDecayFractionsIncrease, kRuleNoNesterovWithDana,
                           kRuleMinReplicas,        kRuleMaxReplicas,
                           kRuleBackupWorkers,      kRuleClusterJobName,
                           kRuleClaimPathAbsolute,  kRuleOutputClaimAndPath,
                           kRuleAutoscaleRange,     kRuleAutoscaleGap,
                           kRuleFromTrainerWithoutTorchscript,
                           kRuleTargetBound,        kRuleOneTarget,
                           kRuleDataPath,           kRuleCustomDataSize,  kRuleShardCount,
                           kRuleCustomDataFromTrainer, kRuleShardsFixed};
  std::map<std::string, int> stated;
  const YAML::Node root = RootSchema();
  for (const CrdValidationRule& r : TrainingJobValidationRules()) {
    SCOPED_TRACE(r.at + ": " + r.rule);
    ++stated[r.message];
    // On a node of the schema, as written there.
    const YAML::Node node = r.at.empty() ? root : SchemaAt(root, r.at);
    ASSERT_TRUE(node.IsDefined()) << "no schema node " << r.at;
    EXPECT_TRUE(node["type"].IsDefined());
    bool written = false;
    for (const YAML::Node& v : node["x-kubernetes-validations"]) {
      written |= v["rule"].Scalar() == r.rule && v["message"].Scalar() == r.message &&
                 (v["fieldPath"] ? v["fieldPath"].Scalar() : "") == r.field_path &&
                 (v["messageExpression"] ? v["messageExpression"].Scalar() : "") ==
                     r.message_expression;
    }
    EXPECT_TRUE(written);
    // The message names the field the API server names: `at`, or the field
    // below it that fieldPath points at, which the schema has.
    EXPECT_EQ(r.message.rfind(r.at + r.field_path + ": ", 0), 0u) << r.message;
    if (!r.field_path.empty()) {
      EXPECT_TRUE(SchemaAt(node, r.field_path.substr(1)).IsDefined()) << r.field_path;
    }
    // An expression starts with the message's own words.
    if (!r.message_expression.empty()) {
      EXPECT_EQ(r.message_expression.rfind("'" + r.message, 0), 0u) << r.message_expression;
    }
  }
  for (const JobRule& rule : rules) {
    EXPECT_EQ(stated[rule.Text()], 1) << rule.Text();
  }
  EXPECT_EQ(stated.size(), std::size(rules));
  // The limit the name rule states is the one its message gives.
  EXPECT_NE(kRuleClusterJobName.Text().find("at most " + std::to_string(kMaxClusterJobNameLength) +
                                            " characters"),
            std::string::npos);
}

TEST(TrainingJobCrdTest, SelectableFieldsAreScalarsOfTheSchema) {
  const YAML::Node version = Crd()["spec"]["versions"][0];
  std::vector<std::string> written;
  for (const YAML::Node& field : version["selectableFields"]) {
    written.push_back(field["jsonPath"].Scalar());
  }
  EXPECT_EQ(written, TrainingJobSelectableFields());
  // The API server's limits: at most 8, each a string, integer or boolean.
  EXPECT_LE(written.size(), 8u);
  for (const std::string& path : written) {
    ASSERT_EQ(path.rfind(".", 0), 0u) << path;
    const YAML::Node node = SchemaAt(RootSchema(), path.substr(1));
    ASSERT_TRUE(node.IsDefined()) << path;
    const std::string type = node["type"].Scalar();
    EXPECT_TRUE(type == "string" || type == "integer" || type == "boolean") << path << ": " << type;
  }
}

TEST(TrainingJobCrdTest, ListsTheRulesReadAreBoundedForCelsCostBudget) {
  // A rule over a list costs by the list's largest size: without maxItems
  // the API server refuses the CRD (its estimate exceeds the budget).
  const YAML::Node fractions = SchemaAt(RootSchema(), "spec.training.optimizer.decay.atFractions");
  ASSERT_TRUE(fractions["x-kubernetes-validations"].IsDefined());
  EXPECT_EQ(fractions["maxItems"].as<uint32_t>(), kMaxDecayFractions);
}

std::string DefaultText(const FieldDefault& value) {
  if (const auto* s = std::get_if<std::string>(&value)) return *s;
  if (const auto* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  if (const auto* i = std::get_if<uint64_t>(&value)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&value)) return FormatNumber(*d);
  return "";
}

TEST(TrainingJobCrdTest, EveryTableFieldIsInTheSchemaAsTheParserReadsIt) {
  const YAML::Node spec = SchemaAt(RootSchema(), "spec");
  int checked = 0;
  ForEachField(SpecFields(), "", [&](const std::string& path, const FieldSchema& f) {
    SCOPED_TRACE("spec." + path);
    const YAML::Node s = SchemaAt(spec, path);
    ASSERT_TRUE(s.IsDefined()) << "not in the schema";
    ++checked;
    EXPECT_EQ(s["type"].Scalar(), OpenApiTypeName(f.type));
    EXPECT_FALSE(s["description"].Scalar().empty());
    const bool free_form = f.type == FieldType::kObject;
    EXPECT_EQ(s["x-kubernetes-preserve-unknown-fields"].IsDefined(), free_form);
    // Choices.
    if (f.choices.empty()) {
      EXPECT_FALSE(s["enum"].IsDefined());
    } else {
      EXPECT_EQ(s["enum"].as<std::vector<std::string>>(), f.choices);
    }
    // Default.
    if (const auto* list = std::get_if<std::vector<double>>(&f.default_value)) {
      EXPECT_EQ(s["default"].as<std::vector<double>>(), *list);
    } else if (f.type == FieldType::kSection) {
      EXPECT_EQ(s["default"].IsDefined(), !f.required);
    } else if (std::holds_alternative<std::monostate>(f.default_value)) {
      EXPECT_FALSE(s["default"].IsDefined());
    } else {
      EXPECT_EQ(s["default"].Scalar(), DefaultText(f.default_value));
      if (f.type == FieldType::kString) {
        EXPECT_EQ(JsonTypeOf(s["default"]), "string");
      }
    }
    // Range: of the value, or of a list's items.
    const YAML::Node bounded = f.type == FieldType::kNumberList ? s["items"] : s;
    EXPECT_EQ(bounded["minimum"].IsDefined(), f.minimum.set);
    EXPECT_EQ(bounded["maximum"].IsDefined(), f.maximum.set);
    if (f.minimum.set) {
      EXPECT_EQ(std::strtod(bounded["minimum"].Scalar().c_str(), nullptr), f.minimum.value);
      EXPECT_EQ(bounded["exclusiveMinimum"].IsDefined(), f.minimum.exclusive);
    }
    if (f.maximum.set) {
      EXPECT_EQ(std::strtod(bounded["maximum"].Scalar().c_str(), nullptr), f.maximum.value);
      EXPECT_EQ(bounded["exclusiveMaximum"].IsDefined(), f.maximum.exclusive);
    }
    if (f.type == FieldType::kInteger || f.type == FieldType::kNumber ||
        f.type == FieldType::kNumberList) {
      EXPECT_TRUE(f.maximum.set) << "every number needs an upper bound the code can honour";
      EXPECT_TRUE(f.minimum.set);
    }
    if (!f.limit_reason.empty()) {
      EXPECT_NE(s["description"].Scalar().find(f.limit_reason), std::string::npos);
    }
    // Strings.
    EXPECT_EQ(s["minLength"].IsDefined(),
              (f.required && f.type == FieldType::kString) || f.non_empty);
    EXPECT_EQ(s["maxLength"].IsDefined(), f.max_length > 0);
    // Required, in the parent's list.
    const size_t dot = path.rfind('.');
    const YAML::Node parent = dot == std::string::npos ? spec : SchemaAt(spec, path.substr(0, dot));
    bool listed = false;
    for (const YAML::Node& r : parent["required"]) listed |= r.Scalar() == f.name;
    EXPECT_EQ(listed, f.required);
  });
  EXPECT_GE(checked, 50);

  // And nothing in the schema that the parser does not read.
  std::vector<std::string> schema_paths, table_paths;
  PropertyPaths(spec, "", &schema_paths);
  ForEachField(SpecFields(), "",
               [&](const std::string& path, const FieldSchema&) { table_paths.push_back(path); });
  EXPECT_EQ(schema_paths, table_paths);
}

TEST(TrainingJobCrdTest, MetadataRestrictsOnlyTheNameAsTheParserDoes) {
  const YAML::Node name = SchemaAt(RootSchema(), "metadata.name");
  ASSERT_TRUE(name.IsDefined());
  EXPECT_EQ(name["maxLength"].as<int>(), 63);
  for (const char* bad : {"Upper", "a.b", "a_b"}) {
    TrainingJob job;
    const std::string manifest = std::string("apiVersion: gaptrain.io/v1alpha1\nkind: TrainingJob\n"
                                             "metadata: {name: '") +
                                 bad + "'}\nspec: {data: {path: /d}, training: {epochs: 1}}\n";
    EXPECT_NE(ParseTrainingJob(manifest, "job.yaml", &job).message().find("metadata.name"),
              std::string::npos)
        << bad;
    EXPECT_EQ(CheckAgainstSchema(RootSchema(), YAML::Load(manifest)).size(), 1u) << bad;
  }
}

// Walks every schema node with a default: the default satisfies the node.
void CheckDefaults(const YAML::Node& schema, const std::string& path, int* count) {
  if (schema["default"]) {
    ++*count;
    EXPECT_EQ(CheckAgainstSchema(schema, schema["default"], path), Errors{}) << path;
  }
  if (schema["properties"]) {
    for (const auto& item : schema["properties"]) {
      CheckDefaults(item.second, path + "." + item.first.Scalar(), count);
    }
  }
  if (schema["items"]) CheckDefaults(schema["items"], path + "[]", count);
}

TEST(TrainingJobCrdTest, DefaultsSatisfyTheirOwnRules) {
  int count = 0;
  CheckDefaults(RootSchema(), "", &count);
  EXPECT_GE(count, 40);
}

TEST(TrainingJobCrdTest, EveryExampleValidatesAgainstTheSchema) {
  std::vector<std::string> files = FilesEndingIn("examples", ".yaml");
  const std::vector<std::string> sim = FilesEndingIn("examples/sim", ".yaml");
  files.insert(files.end(), sim.begin(), sim.end());
  ASSERT_GE(files.size(), 10u);
  for (const std::string& file : files) {
    EXPECT_EQ(CheckAgainstSchema(RootSchema(), YAML::LoadFile(file)), Errors{}) << file;
  }
}

TEST(TrainingJobCrdTest, AgreesWithTheRecordedApiServer) {
  // What the server accepted and what it returned (defaults applied) both
  // validate, status included.
  const YAML::Node created = Recorded("trainingjob-create");
  EXPECT_EQ(CheckAgainstSchema(RootSchema(), created["request"]["body"]), Errors{});
  EXPECT_EQ(CheckAgainstSchema(RootSchema(), created["response"]["body"]), Errors{});
  const YAML::Node with_status = Recorded("trainingjob-status-merge-patch")["response"]["body"];
  ASSERT_TRUE(with_status["status"].IsMap());
  EXPECT_EQ(CheckAgainstSchema(RootSchema(), with_status), Errors{});

  // What it refused: the same fields (and the unknown one it pruned).
  const YAML::Node invalid = Recorded("trainingjob-create-invalid");
  Errors causes;
  for (const YAML::Node& cause : invalid["response"]["body"]["details"]["causes"]) {
    causes.push_back(cause["field"].Scalar());
  }
  Errors fields;
  for (const std::string& error : CheckAgainstSchema(RootSchema(), invalid["request"]["body"])) {
    fields.push_back(error.substr(0, error.find(':')));
  }
  causes.push_back("spec.staleness");  // unknown: the server drops it silently
  std::sort(fields.begin(), fields.end());
  std::sort(causes.begin(), causes.end());
  EXPECT_EQ(fields, causes);
}

// A minimal valid manifest with the field at `path` (under spec) set to
// the YAML `value`.
std::string ManifestWith(const std::string& path, const std::string& value) {
  YAML::Node root = YAML::Load(
      "apiVersion: gaptrain.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: edge}\n"
      "spec: {data: {path: /data}, training: {epochs: 1}}\n");
  YAML::Node node = root["spec"];
  std::istringstream keys(path);
  std::string key;
  std::vector<std::string> parts;
  while (std::getline(keys, key, '.')) parts.push_back(key);
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (!node[parts[i]]) node[parts[i]] = YAML::Node(YAML::NodeType::Map);
    node.reset(node[parts[i]]);
  }
  node[parts.back()] = YAML::Load(value);
  YAML::Emitter out;
  out << root;
  return out.c_str();
}

TEST(TrainingJobCrdTest, ParserAndSchemaRejectTheSameValues) {
  const YAML::Node root = RootSchema();
  int cases = 0;
  ForEachField(SpecFields(), "", [&](const std::string& path, const FieldSchema& f) {
    std::vector<std::string> bad;
    const bool integer = f.type == FieldType::kInteger;
    auto text = [&](double v) {
      const std::string number = FormatNumber(v);
      return f.type == FieldType::kNumberList ? "[" + number + "]" : number;
    };
    if (f.type == FieldType::kInteger || f.type == FieldType::kNumber ||
        f.type == FieldType::kNumberList) {
      // Just past each bound, and each inclusive bound itself is fine.
      const double step_up = integer ? 1 : std::max(1e-9, std::fabs(f.maximum.value) * 1e-9);
      bad.push_back(text(f.maximum.exclusive ? f.maximum.value : f.maximum.value + step_up));
      bad.push_back(text(f.minimum.exclusive ? f.minimum.value : f.minimum.value - 1));
      for (const FieldBound* b : {&f.minimum, &f.maximum}) {
        if (b->exclusive) continue;
        SCOPED_TRACE("spec." + path + " = " + text(b->value));
        EXPECT_EQ(CheckAgainstSchema(root, YAML::Load(ManifestWith(path, text(b->value)))),
                  Errors{});
      }
    }
    if (!f.choices.empty()) bad.push_back("not-a-choice");
    if (f.max_items > 0) {
      // One item too many, each valid and larger than the one before.
      std::string list;
      for (uint32_t i = 1; i <= f.max_items + 1; ++i) {
        list += (list.empty() ? "[" : ", ") + FormatNumber(i / (f.max_items + 2.0));
      }
      bad.push_back(list + "]");
    }
    if (f.required && f.type == FieldType::kString) bad.push_back("''");
    if (f.non_empty) bad.push_back("''");
    // A value of the wrong type.
    switch (f.type) {
      case FieldType::kString:
        bad.push_back("[a]");
        break;
      case FieldType::kBoolean:
        bad.push_back("maybe");
        break;
      case FieldType::kInteger:
        bad.push_back("1.5");
        bad.push_back("lots");
        break;
      case FieldType::kNumber:
      case FieldType::kNumberList:
        bad.push_back("lots");
        break;
      case FieldType::kStringMap:
      case FieldType::kObject:
        bad.push_back("x");
        break;
      case FieldType::kSection:
        bad.push_back("3");
        break;
    }
    for (const std::string& value : bad) {
      SCOPED_TRACE("spec." + path + " = " + value);
      ++cases;
      const std::string manifest = ManifestWith(path, value);
      TrainingJob job;
      const std::string error = ParseTrainingJob(manifest, "job.yaml", &job).message();
      EXPECT_EQ(error.rfind("job.yaml: spec." + path, 0), 0u) << error;
      const Errors schema_errors = CheckAgainstSchema(root, YAML::Load(manifest));
      ASSERT_EQ(schema_errors.size(), 1u) << manifest;
      EXPECT_EQ(schema_errors[0].rfind("spec." + path, 0), 0u) << schema_errors[0];
    }
  });
  EXPECT_GE(cases, 60);
}

// docs/trainingjob.md: the `### PATH` heading's part (up to the next
// heading) for every heading.
std::map<std::string, std::string> DocSections() {
  std::istringstream doc(ReadRaw("docs/trainingjob.md"));
  std::map<std::string, std::string> sections;
  std::string line, current;
  while (std::getline(doc, line)) {
    if (line.rfind("#", 0) == 0) {
      current = line.rfind("### ", 0) == 0 ? line.substr(4, line.find(' ', 4) - 4) : "";
      continue;
    }
    if (!current.empty()) sections[current] += line + "\n";
  }
  return sections;
}

// Each path's last key appears as `key` in the section of the longest
// heading that is a proper prefix of the path.
void ExpectDocumented(const std::map<std::string, std::string>& sections,
                      const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    std::string parent = path;
    const std::string key = path.substr(path.rfind('.') + 1);
    do {
      parent = parent.substr(0, std::min(parent.size(), parent.rfind('.')));
    } while (sections.count(parent) == 0 && parent.find('.') != std::string::npos);
    const auto section = sections.find(parent);
    if (section == sections.end()) {
      ADD_FAILURE() << "docs/trainingjob.md has no heading for " << path;
      continue;
    }
    EXPECT_NE(section->second.find("`" + key + "`"), std::string::npos)
        << "docs/trainingjob.md does not document " << path << " under ### " << parent;
  }
}

// docs/trainingjob.md's "Rules between fields" lists every CEL rule of the
// CRD, in the words the API server answers with.
TEST(TrainingJobCrdTest, TheDocsListEveryRuleBetweenFields) {
  const std::map<std::string, std::string> sections = DocSections();
  const auto rules = sections.find("Rules");  // ### Rules between fields
  ASSERT_NE(rules, sections.end()) << "docs/trainingjob.md has no ### Rules between fields";
  const std::vector<CrdValidationRule> cel = TrainingJobValidationRules();
  ASSERT_FALSE(cel.empty());
  for (const CrdValidationRule& r : cel) {
    EXPECT_NE(rules->second.find("`" + r.message + "`"), std::string::npos)
        << "docs/trainingjob.md, Rules between fields, does not list " << r.message;
  }
}

TEST(TrainingJobCrdTest, TheDocsListEveryFieldAndTheStatus) {
  const std::map<std::string, std::string> sections = DocSections();
  ASSERT_FALSE(sections.empty()) << "cannot read docs/trainingjob.md";
  std::vector<std::string> paths;
  auto add = [&](const std::string& path, const FieldSchema&) { paths.push_back(path); };
  ForEachField(MetadataFields(), "metadata", add);
  ForEachField(SpecFields(), "spec", add);
  PropertyPaths(SchemaAt(RootSchema(), "status"), "status", &paths);
  ExpectDocumented(sections, paths);
}

}  // namespace
}  // namespace gaptrain
