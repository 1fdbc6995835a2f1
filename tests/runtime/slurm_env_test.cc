// Slurm's compressed node and task lists expand exactly as Slurm does (padding, product order,
// suffixes), and everything malformed is one line that quotes the list and says what is wrong.
#include "lockstep/runtime/setup/slurm_env.h"

#include <gtest/gtest.h>

namespace lockstep::runtime {
namespace {

using Names = std::vector<std::string>;

Names Hosts(const std::string& text) {
  auto hosts = ExpandSlurmHostlist(text);
  EXPECT_TRUE(hosts.ok()) << text << ": " << hosts.status().message();
  return hosts.ok() ? *hosts : Names{};
}

std::string HostsError(const std::string& text) {
  auto hosts = ExpandSlurmHostlist(text);
  EXPECT_FALSE(hosts.ok()) << text;
  if (hosts.ok()) return "";
  EXPECT_EQ(hosts.status().code(), StatusCode::kInvalidArgument) << text;
  EXPECT_EQ(hosts.status().message().find('\n'), std::string::npos) << text;
  return hosts.status().message();
}

std::string TasksError(const std::string& text, int nodes) {
  auto counts = ExpandSlurmTasksPerNode(text, nodes);
  EXPECT_FALSE(counts.ok()) << text;
  if (counts.ok()) return "";
  EXPECT_EQ(counts.status().code(), StatusCode::kInvalidArgument) << text;
  EXPECT_EQ(counts.status().message().find('\n'), std::string::npos) << text;
  return counts.status().message();
}

TEST(SlurmHostlist, ExpandsRangesListsAndPlainNames) {
  EXPECT_EQ(Hosts("node[01-04,07],login,gpu3"),
            (Names{"node01", "node02", "node03", "node04", "node07", "login", "gpu3"}));
  EXPECT_EQ(Hosts("gpu3"), (Names{"gpu3"}));
  EXPECT_EQ(Hosts("n[5]"), (Names{"n5"}));
  EXPECT_EQ(Hosts("n[3-3]"), (Names{"n3"}));
  EXPECT_EQ(Hosts("a,b[1-2],c"), (Names{"a", "b1", "b2", "c"}));
}

TEST(SlurmHostlist, PadsToTheLowerBoundsWidth) {
  EXPECT_EQ(Hosts("n[08-11]"), (Names{"n08", "n09", "n10", "n11"}));
  EXPECT_EQ(Hosts("n[8-11]"), (Names{"n8", "n9", "n10", "n11"}));
  EXPECT_EQ(Hosts("n[098-101]"), (Names{"n098", "n099", "n100", "n101"}));
  EXPECT_EQ(Hosts("n[0-1,007]"), (Names{"n0", "n1", "n007"}));  // each range its own width
  EXPECT_EQ(Hosts("n[000]"), (Names{"n000"}));
}

TEST(SlurmHostlist, GroupsExpandAsAProductLeftmostSlowest) {
  EXPECT_EQ(Hosts("rack[1-2]-n[1-2]"), (Names{"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}));
  EXPECT_EQ(Hosts("a[1-2]b[3-4]c[5-6]"),
            (Names{"a1b3c5", "a1b3c6", "a1b4c5", "a1b4c6", "a2b3c5", "a2b3c6", "a2b4c5", "a2b4c6"}));
  EXPECT_EQ(Hosts("r[1,3]n[7-8]x,y"), (Names{"r1n7x", "r1n8x", "r3n7x", "r3n8x", "y"}));
}

TEST(SlurmHostlist, TextAfterAGroupIsASuffix) {
  EXPECT_EQ(Hosts("n[1-2].ib"), (Names{"n1.ib", "n2.ib"}));
  EXPECT_EQ(Hosts("[1-2]x"), (Names{"1x", "2x"}));
  EXPECT_EQ(Hosts("n[1-2].ib,m"), (Names{"n1.ib", "n2.ib", "m"}));
}

TEST(SlurmHostlist, MalformedListsAreOneLineQuotingTheList) {
  EXPECT_EQ(HostsError("node[01-"), "Slurm node list \"node[01-\": unclosed '['");
  EXPECT_NE(HostsError("").find("empty list"), std::string::npos);
  EXPECT_NE(HostsError("a,,b").find("\"a,,b\": empty entry"), std::string::npos);
  EXPECT_NE(HostsError(",a").find("empty entry"), std::string::npos);
  EXPECT_NE(HostsError("a,").find("empty entry"), std::string::npos);
  EXPECT_NE(HostsError("n[1-[2]]").find("nested '['"), std::string::npos);
  EXPECT_NE(HostsError("n1]").find("']' without '['"), std::string::npos);
  EXPECT_NE(HostsError("n[1]]").find("']' without '['"), std::string::npos);
  EXPECT_NE(HostsError("n[]").find("empty brackets \"[]\""), std::string::npos);
  EXPECT_NE(HostsError("n[1,,2]").find("empty range"), std::string::npos);
  EXPECT_NE(HostsError("n[5-3]").find("range \"5-3\" runs backwards"), std::string::npos);
  EXPECT_NE(HostsError("n[1-x]").find("\"x\" is not a number in \"[1-x]\""), std::string::npos);
  EXPECT_NE(HostsError("n[-3]").find("a number is missing"), std::string::npos);
  EXPECT_NE(HostsError("n[1-2-3]").find("\"2-3\" is not a number"), std::string::npos);
  EXPECT_NE(HostsError("n[1234567890]").find("more than 9 digits"), std::string::npos);
  EXPECT_NE(HostsError("n[1-2], m").find("white space"), std::string::npos);
  EXPECT_EQ(HostsError("a\nb"), "Slurm node list \"a\\x0ab\": white space is not allowed");
}

TEST(SlurmHostlist, NamesAHostListedTwice) {
  EXPECT_EQ(HostsError("node[01-02],node01"), "Slurm node list \"node[01-02],node01\" names host \"node01\" twice");
  EXPECT_NE(HostsError("n[1-3,2]").find("names host \"n2\" twice"), std::string::npos);
  EXPECT_EQ(Hosts("n[1,01]"), (Names{"n1", "n01"}));  // different names
}

TEST(SlurmHostlist, RefusesMoreThan65536Hosts) {
  EXPECT_EQ(Hosts("n[1-65536]").size(), 65536u);
  EXPECT_NE(HostsError("n[1-65537]").find("more than 65536 hosts"), std::string::npos);
  EXPECT_NE(HostsError("n[1-65536],x").find("more than 65536 hosts"), std::string::npos);
  EXPECT_NE(HostsError("a[1-256]b[1-257]").find("more than 65536 hosts"), std::string::npos);
  EXPECT_NE(HostsError("n[0-999999999]").find("more than 65536 hosts"), std::string::npos);
}

TEST(SlurmTasksPerNode, ExpandsOnlyAsWritten) {
  EXPECT_EQ(*ExpandSlurmTasksPerNode("2(x3),1", 4), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(*ExpandSlurmTasksPerNode("4", 1), (std::vector<int>{4}));
  EXPECT_EQ(*ExpandSlurmTasksPerNode("1,8(x2),3", 4), (std::vector<int>{1, 8, 8, 3}));
  EXPECT_EQ(*ExpandSlurmTasksPerNode("16(x1)", 1), (std::vector<int>{16}));
}

TEST(SlurmTasksPerNode, MustCoverEveryNode) {
  EXPECT_EQ(TasksError("2(x3)", 2), "SLURM_TASKS_PER_NODE \"2(x3)\" gives 3 nodes, SLURM_JOB_NODELIST has 2");
  EXPECT_NE(TasksError("4", 3).find("gives 1 nodes, SLURM_JOB_NODELIST has 3"), std::string::npos);
}

TEST(SlurmTasksPerNode, MalformedListsAreOneLine) {
  EXPECT_NE(TasksError("", 1).find("empty list"), std::string::npos);
  EXPECT_NE(TasksError("2,,1", 3).find("empty entry"), std::string::npos);
  EXPECT_NE(TasksError("0", 1).find("counts must be at least 1"), std::string::npos);
  EXPECT_NE(TasksError("2(x0)", 1).find("counts must be at least 1"), std::string::npos);
  EXPECT_NE(TasksError("2(3)", 3).find("\"2(3)\" is not N or N(xM)"), std::string::npos);
  EXPECT_NE(TasksError("2(x3", 3).find("is not N or N(xM)"), std::string::npos);
  EXPECT_NE(TasksError("2(x)", 1).find("is not N or N(xM)"), std::string::npos);
  EXPECT_NE(TasksError("a", 1).find("\"a\" is not a number"), std::string::npos);
  EXPECT_NE(TasksError("-1", 1).find("is not a number"), std::string::npos);
  EXPECT_NE(TasksError("2(x1)(x2)", 2).find("is not a number"), std::string::npos);
  EXPECT_NE(TasksError("1234567890", 1).find("more than 9 digits"), std::string::npos);
  EXPECT_NE(TasksError("1(x65537)", 65537).find("more than 65536 nodes"), std::string::npos);
  EXPECT_NE(TasksError("1(x999999999)", 1).find("more than 65536 nodes"), std::string::npos);
}

}  // namespace
}  // namespace lockstep::runtime
