#include "helm/chart_renderer.h"

#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <utility>
#include <vector>

#include "operator/testing/yaml_to_json.h"

namespace gaptrain {
namespace {

using nlohmann::json;

Status ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  *out = text.str();
  return Status::OK();
}

Status ReadYaml(const std::string& path, json* out) {
  std::string text;
  GAPTRAIN_RETURN_IF_ERROR(ReadFile(path, &text));
  Status s = kube_testing::YamlToJson(text, out);
  if (!s.ok()) return Status::InvalidArgument(path + ": " + s.message());
  if (out->is_null()) *out = json::object();
  return Status::OK();
}

// `helm -f overrides.yaml`: maps merge key by key, anything else replaces.
void MergeValues(const json& overrides, json* values) {
  for (const auto& [key, value] : overrides.items()) {
    if (value.is_object() && values->contains(key) && (*values)[key].is_object()) {
      MergeValues(value, &(*values)[key]);
    } else {
      (*values)[key] = value;
    }
  }
}

// Go templates' truth: false, 0, "", null and empty collections are false.
bool IsTrue(const json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_string()) return !v.get<std::string>().empty();
  if (v.is_array() || v.is_object()) return !v.empty();
  return true;
}

// A value as {{ }} prints it.
Status Print(const json& v, std::string* out) {
  if (v.is_string()) {
    *out = v.get<std::string>();
  } else if (v.is_boolean()) {
    *out = v.get<bool>() ? "true" : "false";
  } else if (v.is_number()) {
    // Helm reads values as float64, which Go prints as %g: 1000000 becomes
    // 1e+06 and fractions keep their digits. Only what prints plainly.
    const double d = v.get<double>();
    if (d != std::floor(d) || std::fabs(d) >= 1e6) {
      return Status::InvalidArgument("the number " + v.dump() +
                                     " would print in Go's float form; quote it in values.yaml");
    }
    *out = std::to_string(static_cast<int64_t>(d));
  } else {
    return Status::InvalidArgument("cannot print " + std::string(v.type_name()) +
                                   " (use toYaml)");
  }
  return Status::OK();
}

bool IsEmptyContainer(const json& v) { return (v.is_object() || v.is_array()) && v.empty(); }

std::string YamlScalar(const json& v) {
  if (v.is_object()) return "{}";
  if (v.is_array()) return "[]";
  return v.dump();  // strings double-quoted and escaped as JSON, which YAML reads
}

// Block YAML of a non-empty collection, each line indented by `indent`.
void EmitYaml(const json& v, int indent, std::string* out) {
  const std::string pad(indent, ' ');
  if (v.is_object()) {
    for (const auto& [key, value] : v.items()) {
      *out += pad + json(key).dump() + ":";
      if ((value.is_object() || value.is_array()) && !value.empty()) {
        *out += "\n";
        EmitYaml(value, indent + 2, out);
      } else {
        *out += " " + YamlScalar(value) + "\n";
      }
    }
    return;
  }
  for (const json& item : v) {
    if ((item.is_object() || item.is_array()) && !item.empty()) {
      *out += pad + "-\n";
      EmitYaml(item, indent + 2, out);
    } else {
      *out += pad + "- " + YamlScalar(item) + "\n";
    }
  }
}

std::string ToYaml(const json& v) {
  if (!(v.is_object() || v.is_array()) || IsEmptyContainer(v)) return YamlScalar(v);
  std::string out;
  EmitYaml(v, 0, &out);
  out.pop_back();  // Helm's toYaml drops the final newline
  return out;
}

std::string Indent(int n, const std::string& text) {
  const std::string pad(n, ' ');
  std::string out = pad;
  for (char c : text) {
    out += c;
    if (c == '\n') out += pad;
  }
  return out;
}

// The parsed template.
struct Node {
  enum Kind { kText, kOutput, kIf } kind;
  std::string text;      // kText
  std::string pipeline;  // kOutput, kIf
  std::vector<std::unique_ptr<Node>> then_nodes, else_nodes;
};

struct Action {
  std::string body;  // without the delimiters and trim markers, trimmed
};

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && IsSpace(s[b])) ++b;
  while (e > b && IsSpace(s[e - 1])) --e;
  return s.substr(b, e - b);
}

// Splits `text` into text pieces and actions, applying the trim markers.
// pieces[i] is text when i is even, an action when odd.
Status Lex(const std::string& name, const std::string& text, std::vector<std::string>* pieces) {
  size_t pos = 0;
  bool trim_next = false;
  while (true) {
    const size_t open = text.find("{{", pos);
    std::string literal = text.substr(pos, open == std::string::npos ? std::string::npos
                                                                       : open - pos);
    if (trim_next) {
      size_t b = 0;
      while (b < literal.size() && IsSpace(literal[b])) ++b;
      literal.erase(0, b);
    }
    if (open == std::string::npos) {
      pieces->push_back(literal);
      return Status::OK();
    }
    const size_t close = text.find("}}", open + 2);
    if (close == std::string::npos) {
      return Status::InvalidArgument(name + ": unclosed action at offset " + std::to_string(open));
    }
    std::string body = text.substr(open + 2, close - open - 2);
    if (body.size() >= 2 && body[0] == '-' && IsSpace(body[1])) {
      while (!literal.empty() && IsSpace(literal.back())) literal.pop_back();
      body.erase(0, 1);
    }
    trim_next = body.size() >= 2 && body.back() == '-' && IsSpace(body[body.size() - 2]);
    if (trim_next) body.pop_back();
    pieces->push_back(literal);
    pieces->push_back(Trim(body));
    pos = close + 2;
  }
}

bool StartsWithWord(const std::string& body, const std::string& word) {
  return body == word || (body.rfind(word, 0) == 0 && IsSpace(body[word.size()]));
}

// Builds the tree from pieces[*index...] until {{ end }} / {{ else }} (when
// `nested`) or the end.
Status Parse(const std::string& name, const std::vector<std::string>& pieces, size_t* index,
             bool nested, std::vector<std::unique_ptr<Node>>* nodes, std::string* stopped_at) {
  for (; *index < pieces.size(); ++*index) {
    const std::string& piece = pieces[*index];
    if (*index % 2 == 0) {
      if (!piece.empty()) nodes->push_back(std::make_unique<Node>(Node{Node::kText, piece, "", {}, {}}));
      continue;
    }
    if (piece.rfind("/*", 0) == 0) {
      if (piece.size() < 4 || piece.compare(piece.size() - 2, 2, "*/") != 0) {
        return Status::InvalidArgument(name + ": a comment must end with */ before }}");
      }
      continue;
    }
    if (piece == "end" || piece == "else") {
      if (!nested) return Status::InvalidArgument(name + ": {{ " + piece + " }} without {{ if }}");
      *stopped_at = piece;
      return Status::OK();
    }
    if (StartsWithWord(piece, "if")) {
      auto node = std::make_unique<Node>(Node{Node::kIf, "", Trim(piece.substr(2)), {}, {}});
      ++*index;
      std::string stop;
      GAPTRAIN_RETURN_IF_ERROR(Parse(name, pieces, index, true, &node->then_nodes, &stop));
      if (stop == "else") {
        ++*index;
        GAPTRAIN_RETURN_IF_ERROR(Parse(name, pieces, index, true, &node->else_nodes, &stop));
      }
      if (stop != "end") return Status::InvalidArgument(name + ": {{ if }} without {{ end }}");
      nodes->push_back(std::move(node));
      continue;
    }
    for (const char* unsupported : {"range", "with", "define", "template", "block", "include"}) {
      if (StartsWithWord(piece, unsupported)) {
        return Status::InvalidArgument(name + ": '" + unsupported +
                                       "' is outside the subset ChartRenderer renders");
      }
    }
    nodes->push_back(std::make_unique<Node>(Node{Node::kOutput, "", piece, {}, {}}));
  }
  if (nested) return Status::InvalidArgument(name + ": {{ if }} without {{ end }}");
  return Status::OK();
}

// Words of a command: quoted strings stay whole.
Status SplitWords(const std::string& command, std::vector<std::string>* words) {
  for (size_t i = 0; i < command.size();) {
    if (IsSpace(command[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    if (command[i] == '"') {
      for (end = i + 1; end < command.size() && command[end] != '"'; ++end) {
        if (command[end] == '\\') ++end;
      }
      if (end >= command.size()) return Status::InvalidArgument("unterminated string in '" + command + "'");
      ++end;
    } else {
      while (end < command.size() && !IsSpace(command[end])) ++end;
    }
    words->push_back(command.substr(i, end - i));
    i = end;
  }
  if (words->empty()) return Status::InvalidArgument("empty command");
  return Status::OK();
}

std::vector<std::string> SplitPipeline(const std::string& pipeline) {
  std::vector<std::string> commands(1);
  bool in_string = false;
  for (size_t i = 0; i < pipeline.size(); ++i) {
    const char c = pipeline[i];
    if (in_string && c == '\\' && i + 1 < pipeline.size()) {
      commands.back() += c;
      commands.back() += pipeline[++i];
      continue;
    }
    if (c == '"') in_string = !in_string;
    if (c == '|' && !in_string) {
      commands.emplace_back();
    } else {
      commands.back() += c;
    }
  }
  return commands;
}

class Evaluator {
 public:
  Evaluator(const std::string& name, const std::string& chart_dir, const json& context)
      : name_(name), chart_dir_(chart_dir), context_(context) {}

  Status Pipeline(const std::string& pipeline, json* out) const {
    bool have_input = false;
    json value;
    for (const std::string& command : SplitPipeline(pipeline)) {
      std::vector<std::string> words;
      Status s = SplitWords(command, &words);
      if (!s.ok()) return Error(s.message());
      GAPTRAIN_RETURN_IF_ERROR(Command(words, have_input ? &value : nullptr, &value));
      have_input = true;
    }
    *out = value;
    return Status::OK();
  }

  Status Render(const std::vector<std::unique_ptr<Node>>& nodes, std::string* out) const {
    for (const auto& node : nodes) {
      if (node->kind == Node::kText) {
        *out += node->text;
      } else if (node->kind == Node::kOutput) {
        json value;
        GAPTRAIN_RETURN_IF_ERROR(Pipeline(node->pipeline, &value));
        std::string text;
        Status s = Print(value, &text);
        if (!s.ok()) return Error("{{ " + node->pipeline + " }}: " + s.message());
        *out += text;
      } else {
        json condition;
        GAPTRAIN_RETURN_IF_ERROR(Pipeline(node->pipeline, &condition));
        GAPTRAIN_RETURN_IF_ERROR(Render(IsTrue(condition) ? node->then_nodes : node->else_nodes, out));
      }
    }
    return Status::OK();
  }

 private:
  Status Error(const std::string& message) const {
    return Status::InvalidArgument(name_ + ": " + message);
  }

  // A value word: .Path.To.Value, "string", integer.
  Status Term(const std::string& word, json* out) const {
    if (word.front() == '"') {
      try {
        *out = json::parse(word);  // Go's escapes in these strings are JSON's
      } catch (const json::exception&) {
        return Error("bad string literal " + word);
      }
      return Status::OK();
    }
    if (std::isdigit(static_cast<unsigned char>(word.front())) || word.front() == '-') {
      for (size_t i = 1; i < word.size(); ++i) {
        if (!std::isdigit(static_cast<unsigned char>(word[i]))) return Error("bad number " + word);
      }
      *out = std::stoll(word);
      return Status::OK();
    }
    if (word.front() != '.' || word.size() < 2) return Error("unknown word '" + word + "'");
    const json* v = &context_;
    std::string walked;
    std::istringstream keys(word.substr(1));
    std::string key;
    while (std::getline(keys, key, '.')) {
      walked += "." + key;
      if (!v->is_object() || !v->contains(key)) {
        return Error(walked + " is not defined (the renderer refuses what Helm would print as "
                     "empty)");
      }
      v = &(*v)[key];
    }
    *out = *v;
    return Status::OK();
  }

  Status Int(const json& v, const std::string& function, int* out) const {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 200) {
      return Error(function + ": wants a width in [0, 200], got " + v.dump());
    }
    *out = v.get<int>();
    return Status::OK();
  }

  Status Command(const std::vector<std::string>& words, const json* input, json* out) const {
    const std::string& head = words[0];
    std::vector<json> args;
    for (size_t i = 1; i < words.size(); ++i) {
      args.emplace_back();
      GAPTRAIN_RETURN_IF_ERROR(Term(words[i], &args.back()));
    }
    if (input != nullptr) args.push_back(*input);
    auto want = [&](size_t n) -> Status {
      if (args.size() == n) return Status::OK();
      return Error(head + ": takes " + std::to_string(n) + " argument(s), got " +
                   std::to_string(args.size()));
    };
    if (head == "quote") {
      GAPTRAIN_RETURN_IF_ERROR(want(1));
      std::string text;
      Status s = Print(args[0], &text);
      if (!s.ok()) return Error("quote: " + s.message());
      *out = json(text).dump();  // Go's %q for the strings a chart holds
      return Status::OK();
    }
    if (head == "default") {
      GAPTRAIN_RETURN_IF_ERROR(want(2));
      *out = IsTrue(args[1]) ? args[1] : args[0];
      return Status::OK();
    }
    if (head == "toYaml") {
      GAPTRAIN_RETURN_IF_ERROR(want(1));
      *out = ToYaml(args[0]);
      return Status::OK();
    }
    if (head == "indent" || head == "nindent") {
      GAPTRAIN_RETURN_IF_ERROR(want(2));
      int n = 0;
      GAPTRAIN_RETURN_IF_ERROR(Int(args[0], head, &n));
      if (!args[1].is_string()) return Error(head + ": wants a string, got " + args[1].dump());
      *out = (head == "nindent" ? "\n" : "") + Indent(n, args[1].get<std::string>());
      return Status::OK();
    }
    if (head == ".Files.Get") {
      GAPTRAIN_RETURN_IF_ERROR(want(1));
      if (!args[0].is_string()) return Error(".Files.Get: wants a path");
      const std::string path = args[0].get<std::string>();
      if (path.empty() || path[0] == '/' || path.find("..") != std::string::npos) {
        return Error(".Files.Get: '" + path + "' is not a path inside the chart");
      }
      std::string text;
      Status s = ReadFile(chart_dir_ + "/" + path, &text);
      if (!s.ok()) return Error(".Files.Get: " + s.message());
      *out = text;
      return Status::OK();
    }
    if (std::isalpha(static_cast<unsigned char>(head[0]))) {
      return Error("function '" + head + "' is outside the subset ChartRenderer renders");
    }
    if (words.size() != 1 || input != nullptr) {
      return Error("'" + head + "' is a value, not a function; it takes no arguments");
    }
    return Term(head, out);
  }

  std::string name_;
  std::string chart_dir_;
  const json& context_;
};

}  // namespace

Status ChartRenderer::Load(const std::string& chart_dir, const json& value_overrides,
                           const ChartRelease& release, ChartRenderer* out) {
  json chart, values;
  GAPTRAIN_RETURN_IF_ERROR(ReadYaml(chart_dir + "/Chart.yaml", &chart));
  GAPTRAIN_RETURN_IF_ERROR(ReadYaml(chart_dir + "/values.yaml", &values));
  for (const char* key : {"name", "version", "appVersion"}) {
    if (!chart.contains(key) || !chart[key].is_string()) {
      return Status::InvalidArgument(chart_dir + "/Chart.yaml: " + key + ": must be a string");
    }
  }
  MergeValues(value_overrides, &values);
  out->chart_dir_ = chart_dir;
  out->context_ = {
      {"Values", values},
      {"Release", {{"Name", release.name}, {"Namespace", release.name_space}, {"Service", "Helm"}}},
      {"Chart",
       {{"Name", chart["name"]}, {"Version", chart["version"]}, {"AppVersion", chart["appVersion"]}}}};
  return Status::OK();
}

Status ChartRenderer::RenderText(const std::string& name, const std::string& text,
                                 std::string* out) const {
  std::vector<std::string> pieces;
  GAPTRAIN_RETURN_IF_ERROR(Lex(name, text, &pieces));
  std::vector<std::unique_ptr<Node>> nodes;
  size_t index = 0;
  std::string stop;
  GAPTRAIN_RETURN_IF_ERROR(Parse(name, pieces, &index, false, &nodes, &stop));
  out->clear();
  return Evaluator(name, chart_dir_, context_).Render(nodes, out);
}

Status ChartRenderer::Render(const std::string& name, std::string* out) const {
  std::string text;
  GAPTRAIN_RETURN_IF_ERROR(ReadFile(chart_dir_ + "/templates/" + name, &text));
  return RenderText("templates/" + name, text, out);
}

Status ChartRenderer::RenderAll(std::map<std::string, std::string>* out) const {
  std::error_code error;
  std::filesystem::directory_iterator entries(chart_dir_ + "/templates", error);
  if (error) return Status::NotFound(chart_dir_ + "/templates: " + error.message());
  for (const auto& entry : entries) {
    const std::string name = entry.path().filename().string();
    if (name[0] == '_' || name.size() < 5 || name.compare(name.size() - 5, 5, ".yaml") != 0) {
      continue;
    }
    GAPTRAIN_RETURN_IF_ERROR(Render(name, &(*out)[name]));
  }
  return Status::OK();
}

}  // namespace gaptrain
