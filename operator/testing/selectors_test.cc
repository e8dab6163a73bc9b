#include "operator/testing/selectors.h"

#include <gtest/gtest.h>

#include <map>

namespace gaptrain {
namespace kube_testing {
namespace {

using nlohmann::json;

bool Selects(const std::string& selector, const json& labels) {
  LabelSelector s;
  Status status = LabelSelector::Parse(selector, &s);
  EXPECT_TRUE(status.ok()) << selector << ": " << status.ToString();
  return s.Matches(labels);
}

TEST(LabelSelectorTest, EqualityOperators) {
  const json labels = {{"gaptrain.io/job-name", "mnist"}, {"tier", "trainer"}};
  EXPECT_TRUE(Selects("gaptrain.io/job-name=mnist", labels));
  EXPECT_TRUE(Selects("gaptrain.io/job-name==mnist", labels));
  EXPECT_FALSE(Selects("gaptrain.io/job-name=fmnist", labels));
  EXPECT_TRUE(Selects("gaptrain.io/job-name!=fmnist", labels));
  EXPECT_FALSE(Selects("gaptrain.io/job-name!=mnist", labels));
  // != also selects objects without the label.
  EXPECT_TRUE(Selects("missing!=x", labels));
  EXPECT_TRUE(Selects("gaptrain.io/job-name=mnist, tier=trainer", labels));
  EXPECT_FALSE(Selects("gaptrain.io/job-name=mnist,tier=evaluator", labels));
}

TEST(LabelSelectorTest, SetAndExistenceOperators) {
  const json labels = {{"tier", "trainer"}, {"index", "3"}};
  EXPECT_TRUE(Selects("tier in (trainer, evaluator)", labels));
  EXPECT_FALSE(Selects("tier in (evaluator)", labels));
  EXPECT_TRUE(Selects("tier notin (evaluator)", labels));
  EXPECT_FALSE(Selects("tier notin (trainer,evaluator)", labels));
  EXPECT_TRUE(Selects("absent notin (x)", labels));
  EXPECT_FALSE(Selects("absent in (x)", labels));
  EXPECT_TRUE(Selects("tier", labels));
  EXPECT_FALSE(Selects("absent", labels));
  EXPECT_TRUE(Selects("!absent", labels));
  EXPECT_FALSE(Selects("!tier", labels));
  EXPECT_TRUE(Selects("index>2", labels));
  EXPECT_FALSE(Selects("index<3", labels));
  EXPECT_TRUE(Selects("", labels));
  EXPECT_TRUE(Selects("!tier", json()));
}

TEST(LabelSelectorTest, EmptyValueSelectsEmptyLabel) {
  EXPECT_TRUE(Selects("a=", json{{"a", ""}}));
  EXPECT_FALSE(Selects("a=", json{{"a", "x"}}));
}

TEST(LabelSelectorTest, MalformedSelectorsAreErrorsNamingTheProblem) {
  const std::map<std::string, std::string> bad = {
      {"a=b=c", "found '=', expected: ',' or 'end of string'"},
      {"tier in trainer", "found 'trainer', expected: '('"},
      {"tier in (a", "found 'end of string', expected: ',', ')'"},
      {"=x", "found '=', expected: !, identifier"},
      {"bad key=x", "found 'key', expected: in, notin, =, ==, !=, gt, lt"},
      {"a/b/c=x", "key: Invalid value: \"a/b/c\""},
      {"a=no spaces", "found 'spaces', expected: ',' or 'end of string'"},
      {"a=-bad-", "values[0]: Invalid value: \"-bad-\""},
      {"n>x", "must be an integer"},
  };
  for (const auto& [selector, why] : bad) {
    LabelSelector s;
    Status status = LabelSelector::Parse(selector, &s);
    ASSERT_FALSE(status.ok()) << selector;
    EXPECT_NE(status.message().find("unable to parse requirement: "), std::string::npos);
    EXPECT_NE(status.message().find(why), std::string::npos) << selector << ": " << status.message();
  }
}

TEST(FieldSelectorTest, MatchesEqualityAndInequality) {
  FieldSelector s;
  ASSERT_TRUE(FieldSelector::Parse("metadata.name=a\\,b,spec.nodeName!=node-1", &s).ok());
  EXPECT_EQ(s.Fields(), (std::vector<std::string>{"metadata.name", "spec.nodeName"}));
  std::map<std::string, std::string> fields = {{"metadata.name", "a,b"}, {"spec.nodeName", "node-2"}};
  auto lookup = [&](const std::string& f) { return fields[f]; };
  EXPECT_TRUE(s.Matches(lookup));
  fields["spec.nodeName"] = "node-1";
  EXPECT_FALSE(s.Matches(lookup));
  FieldSelector empty;
  ASSERT_TRUE(FieldSelector::Parse("", &empty).ok());
  EXPECT_TRUE(empty.empty());
}

TEST(FieldSelectorTest, RejectsTermsWithoutOperator) {
  FieldSelector s;
  Status status = FieldSelector::Parse("metadata.name", &s);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message(), "invalid selector: 'metadata.name'; can't understand 'metadata.name'");
  EXPECT_FALSE(FieldSelector::Parse("a=b=c", &s).ok());
  EXPECT_FALSE(FieldSelector::Parse("a=b\\x", &s).ok());
}

}  // namespace
}  // namespace kube_testing
}  // namespace gaptrain
