#include "operator/testing/selectors.h"

#include <cstdlib>
#include <utility>

#include "operator/testing/name_validation.h"

namespace gaptrain {
namespace kube_testing {

using nlohmann::json;

namespace {

enum class Token {
  kEnd, kIdentifier, kNot, kEquals, kDoubleEquals, kNotEquals, kIn, kNotIn, kOpen, kClose,
  kComma, kGreater, kLess
};

struct Lexeme {
  Token token;
  std::string text;
};

bool IsSpecial(char c) {
  return c == '!' || c == '=' || c == '(' || c == ')' || c == ',' || c == '<' || c == '>' ||
         c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// apimachinery's selector lexer.
std::vector<Lexeme> Lex(const std::string& s) {
  std::vector<Lexeme> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++i;
      continue;
    }
    if (c == '!' && i + 1 < s.size() && s[i + 1] == '=') {
      out.push_back({Token::kNotEquals, "!="});
      i += 2;
    } else if (c == '=' && i + 1 < s.size() && s[i + 1] == '=') {
      out.push_back({Token::kDoubleEquals, "=="});
      i += 2;
    } else if (c == '!') {
      out.push_back({Token::kNot, "!"});
      ++i;
    } else if (c == '=') {
      out.push_back({Token::kEquals, "="});
      ++i;
    } else if (c == '(') {
      out.push_back({Token::kOpen, "("});
      ++i;
    } else if (c == ')') {
      out.push_back({Token::kClose, ")"});
      ++i;
    } else if (c == ',') {
      out.push_back({Token::kComma, ","});
      ++i;
    } else if (c == '>') {
      out.push_back({Token::kGreater, ">"});
      ++i;
    } else if (c == '<') {
      out.push_back({Token::kLess, "<"});
      ++i;
    } else {
      size_t j = i;
      while (j < s.size() && !IsSpecial(s[j])) ++j;
      std::string word = s.substr(i, j - i);
      Token t = Token::kIdentifier;
      if (word == "in") t = Token::kIn;
      if (word == "notin") t = Token::kNotIn;
      out.push_back({t, std::move(word)});
      i = j;
    }
  }
  out.push_back({Token::kEnd, ""});
  return out;
}

Status ParseError(const std::string& why) {
  return Status::InvalidArgument("unable to parse requirement: " + why);
}

Status Found(const Lexeme& l, const std::string& expected) {
  const std::string found = l.token == Token::kEnd ? "end of string" : l.text;
  return ParseError("found '" + found + "', expected: " + expected);
}

Status CheckKey(const std::string& key) {
  const std::vector<std::string> errors = QualifiedNameErrors(key);
  if (errors.empty()) return Status::OK();
  return ParseError("key: Invalid value: " + json(key).dump() + ": " + errors[0]);
}

Status CheckValue(size_t index, const std::string& value) {
  const std::vector<std::string> errors = LabelValueErrors(value);
  if (errors.empty()) return Status::OK();
  return ParseError("values[" + std::to_string(index) + "]: Invalid value: " +
                    json(value).dump() + ": " + errors[0]);
}

bool ParseInteger(const std::string& s, long long* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  *out = std::strtoll(s.c_str(), &end, 10);
  return end != nullptr && *end == '\0';
}

}  // namespace

Status LabelSelector::Parse(const std::string& text, LabelSelector* out) {
  out->requirements_.clear();
  const std::vector<Lexeme> lexemes = Lex(text);
  size_t pos = 0;
  auto peek = [&]() -> const Lexeme& { return lexemes[pos]; };
  auto next = [&]() -> const Lexeme& { return lexemes[pos < lexemes.size() - 1 ? pos++ : pos]; };
  if (peek().token == Token::kEnd) return Status::OK();
  for (;;) {
    Requirement r;
    if (peek().token == Token::kNot) {
      next();
      const Lexeme& key = next();
      if (key.token != Token::kIdentifier) return Found(key, "identifier");
      GAPTRAIN_RETURN_IF_ERROR(CheckKey(key.text));
      r.key = key.text;
      r.op = Operator::kDoesNotExist;
    } else {
      const Lexeme& key = next();
      if (key.token != Token::kIdentifier) return Found(key, "!, identifier");
      GAPTRAIN_RETURN_IF_ERROR(CheckKey(key.text));
      r.key = key.text;
      const Lexeme& op = peek();
      if (op.token == Token::kComma || op.token == Token::kEnd) {
        r.op = Operator::kExists;
      } else {
        next();
        switch (op.token) {
          case Token::kEquals:
          case Token::kDoubleEquals: r.op = Operator::kEquals; break;
          case Token::kNotEquals: r.op = Operator::kNotEquals; break;
          case Token::kIn: r.op = Operator::kIn; break;
          case Token::kNotIn: r.op = Operator::kNotIn; break;
          case Token::kGreater: r.op = Operator::kGreater; break;
          case Token::kLess: r.op = Operator::kLess; break;
          default: return Found(op, "in, notin, =, ==, !=, gt, lt");
        }
        if (r.op == Operator::kIn || r.op == Operator::kNotIn) {
          const Lexeme& open = next();
          if (open.token != Token::kOpen) return Found(open, "'('");
          for (;;) {
            if (peek().token == Token::kIdentifier) {
              r.values.push_back(next().text);
            } else {
              r.values.push_back("");  // "k in (a,)" holds the empty value
            }
            const Lexeme& sep = next();
            if (sep.token == Token::kClose) break;
            if (sep.token != Token::kComma) return Found(sep, "',', ')'");
          }
        } else {
          // "k=" selects the empty value.
          r.values.push_back(peek().token == Token::kIdentifier ? next().text : "");
        }
        for (size_t i = 0; i < r.values.size(); ++i) {
          if (r.op == Operator::kGreater || r.op == Operator::kLess) {
            long long ignored;
            if (!ParseInteger(r.values[i], &ignored)) {
              return ParseError("values[" + std::to_string(i) + "]: Invalid value: " +
                                json(r.values[i]).dump() + ": for 'Gt', 'Lt' operators, the "
                                "value must be an integer");
            }
          } else {
            GAPTRAIN_RETURN_IF_ERROR(CheckValue(i, r.values[i]));
          }
        }
      }
    }
    out->requirements_.push_back(std::move(r));
    const Lexeme& sep = next();
    if (sep.token == Token::kEnd) return Status::OK();
    if (sep.token != Token::kComma) return Found(sep, "',' or 'end of string'");
  }
}

bool LabelSelector::Matches(const Requirement& r, const json& labels) const {
  const bool has = labels.is_object() && labels.contains(r.key) && labels[r.key].is_string();
  const std::string value = has ? labels[r.key].get<std::string>() : std::string();
  auto in_values = [&]() {
    for (const std::string& v : r.values) {
      if (v == value) return true;
    }
    return false;
  };
  switch (r.op) {
    case Operator::kEquals:
    case Operator::kIn: return has && in_values();
    case Operator::kNotEquals:
    case Operator::kNotIn: return !has || !in_values();
    case Operator::kExists: return has;
    case Operator::kDoesNotExist: return !has;
    case Operator::kGreater:
    case Operator::kLess: {
      long long label_number = 0;
      long long bound = 0;
      if (!has || !ParseInteger(value, &label_number) || !ParseInteger(r.values[0], &bound)) {
        return false;
      }
      return r.op == Operator::kGreater ? label_number > bound : label_number < bound;
    }
  }
  return false;
}

bool LabelSelector::Matches(const json& labels) const {
  for (const Requirement& r : requirements_) {
    if (!Matches(r, labels)) return false;
  }
  return true;
}

Status FieldSelector::Parse(const std::string& text, FieldSelector* out) {
  out->terms_.clear();
  if (text.empty()) return Status::OK();
  // Split on unescaped commas, keeping escapes for the term parser.
  std::vector<std::string> parts;
  std::string current;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      current += text[i];
      current += text[++i];
    } else if (text[i] == ',') {
      parts.push_back(current);
      current.clear();
    } else {
      current += text[i];
    }
  }
  parts.push_back(current);
  for (const std::string& part : parts) {
    Term term;
    size_t op_at = std::string::npos;
    size_t op_len = 0;
    for (size_t i = 0; i < part.size(); ++i) {
      if (part[i] == '\\') {
        ++i;
        continue;
      }
      if (part.compare(i, 2, "!=") == 0) {
        op_at = i, op_len = 2, term.equals = false;
      } else if (part.compare(i, 2, "==") == 0) {
        op_at = i, op_len = 2, term.equals = true;
      } else if (part[i] == '=') {
        op_at = i, op_len = 1, term.equals = true;
      }
      if (op_at != std::string::npos) break;
    }
    if (op_at == std::string::npos || op_at == 0) {
      return Status::InvalidArgument("invalid selector: '" + text + "'; can't understand '" +
                                     part + "'");
    }
    term.field = part.substr(0, op_at);
    const std::string escaped = part.substr(op_at + op_len);
    for (size_t i = 0; i < escaped.size(); ++i) {
      if (escaped[i] == '\\') {
        if (i + 1 >= escaped.size() ||
            (escaped[i + 1] != '\\' && escaped[i + 1] != ',' && escaped[i + 1] != '=')) {
          return Status::InvalidArgument("invalid field selector: '" + part +
                                         "': invalid escape sequence");
        }
        term.value += escaped[++i];
      } else if (escaped[i] == '=' || escaped[i] == ',') {
        return Status::InvalidArgument("invalid field selector: '" + part +
                                       "': unescaped '" + std::string(1, escaped[i]) + "'");
      } else {
        term.value += escaped[i];
      }
    }
    out->terms_.push_back(std::move(term));
  }
  return Status::OK();
}

bool FieldSelector::Matches(const std::function<std::string(const std::string&)>& field_value) const {
  for (const Term& t : terms_) {
    if ((field_value(t.field) == t.value) != t.equals) return false;
  }
  return true;
}

std::vector<std::string> FieldSelector::Fields() const {
  std::vector<std::string> fields;
  for (const Term& t : terms_) fields.push_back(t.field);
  return fields;
}

}  // namespace kube_testing
}  // namespace gaptrain
