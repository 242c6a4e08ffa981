// StatusBoard: the /status fields the status page reads (docs/metrics.md),
// their bounds, thread safety, and the page served at / with them.
#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <vector>

#include "daemon/server/metrics.h"
#include "daemon/server/status.h"
#include "daemon/server/status_page.h"
#include "nlohmann/json.hpp"

using nlohmann::json;
using prism::server::CommunicatorRow;
using prism::server::StatusBoard;

namespace {

// A communicator row with its name, kind and counters; the rest default.
CommunicatorRow Row(const std::string& name, const std::string& kind, uint64_t members = 0, uint64_t ops_done = 0) {
  CommunicatorRow r;
  r.name = name;
  r.kind = kind;
  r.members = members;
  r.ops_done = ops_done;
  return r;
}

}  // namespace

TEST_CASE("status JSON: empty collections are present and empty", "[daemon][status]") {
  StatusBoard s;
  const json j = json::parse(s.Json());
  for (const char* k : {"iteration_times", "real_ranks", "communicators", "alerts"}) {
    INFO(k);
    REQUIRE(j.at(k).is_array());
    CHECK(j.at(k).empty());
  }
  CHECK(j.at("divergences").at("count") == 0);
  CHECK(j.at("divergences").at("recent").empty());
  CHECK(j.at("communicators_omitted") == 0);
  CHECK(j.at("uptime_s").get<double>() >= 0);
  for (const char* k : {"daemon", "mode", "state", "graph", "world_size", "iterations_planned", "iterations_done",
                        "emulated_time_s", "last_iteration_time_s", "events", "engine_lag_s", "plugin_sessions"})
    CHECK(j.contains(k));
}

TEST_CASE("status JSON: each setter fills its field", "[daemon][status]") {
  StatusBoard s;
  s.AddIteration(0, prism::FromMilliseconds(1500));
  s.AddIteration(1, prism::FromMilliseconds(1250));
  s.SetRealRanks({5, 0});
  s.UpdateRealRank(0, true, "allreduce on tp[0], 2 MiB");
  s.SetCommunicator(CommunicatorRow{"tp[0]", "TP", 2, 40, 160, 1 << 20, "allreduce 2 MiB"});
  s.SetCommunicator(CommunicatorRow{"tp[0]", "TP", 2, 41, 160, 2 << 20, "idle"});  // replaces
  s.AddDivergence("rank 5: COMMSPLIT expected, got an all-gather of 16 bytes");
  s.SetAlert("rank 5", "real rank 5 has not connected");
  s.SetAlert("rank 5", "real rank 5 has not connected (10 s)");
  s.SetAlert("init", "world init waits for rank 5");
  s.ClearAlert("init");
  const json j = json::parse(s.Json());
  REQUIRE(j.at("iteration_times").size() == 2);
  CHECK(j.at("iteration_times")[1].at("iteration") == 1);
  CHECK(j.at("iteration_times")[1].at("time_s").get<double>() == Approx(1.25));
  CHECK(j.at("last_iteration_time_s").get<double>() == Approx(1.25));
  REQUIRE(j.at("real_ranks").size() == 2);
  CHECK(j.at("real_ranks")[0].at("rank") == 0);  // by rank
  CHECK(j.at("real_ranks")[0].at("connected") == true);
  CHECK(j.at("real_ranks")[0].at("doing") == "allreduce on tp[0], 2 MiB");
  CHECK(j.at("real_ranks")[1].at("doing") == "not connected yet");
  REQUIRE(j.at("communicators").size() == 1);
  const json& c = j.at("communicators")[0];
  CHECK(c.at("name") == "tp[0]");
  CHECK(c.at("ops_done") == 41);
  CHECK(c.at("ops_planned") == 160);
  CHECK(c.at("bytes") == 2 << 20);
  CHECK(c.at("state") == "idle");
  CHECK(j.at("divergences").at("count") == 1);
  CHECK(j.at("divergences").at("recent")[0].at("text").get<std::string>().find("COMMSPLIT") != std::string::npos);
  REQUIRE(j.at("alerts").size() == 1);
  CHECK(j.at("alerts")[0].at("key") == "rank 5");
  CHECK(j.at("alerts")[0].at("text") == "real rank 5 has not connected (10 s)");
}

TEST_CASE("status JSON: histories and rows are bounded, texts cut", "[daemon][status]") {
  StatusBoard s;
  for (uint64_t i = 0; i < StatusBoard::kIterationHistory + 10; ++i) s.AddIteration(i, prism::FromMilliseconds(1));
  for (size_t i = 0; i < StatusBoard::kMaxCommunicatorRows + 7; ++i)
    s.SetCommunicator(Row("c" + std::to_string(i), "TP"));
  s.SetCommunicator(Row("c" + std::to_string(StatusBoard::kMaxCommunicatorRows + 1), "TP"));  // again
  for (size_t i = 0; i < StatusBoard::kMaxDivergences + 5; ++i) s.AddDivergence(std::string(1000, 'x'));
  const json j = json::parse(s.Json());
  CHECK(j.at("iteration_times").size() == StatusBoard::kIterationHistory);
  CHECK(j.at("iteration_times")[0].at("iteration") == 10);
  CHECK(j.at("communicators").size() == StatusBoard::kMaxCommunicatorRows);
  CHECK(j.at("communicators_omitted") == 7);
  CHECK(j.at("divergences").at("count") == StatusBoard::kMaxDivergences + 5);
  CHECK(j.at("divergences").at("recent").size() == StatusBoard::kMaxDivergences);
  CHECK(j.at("divergences").at("recent")[0].at("text").get<std::string>().size() == StatusBoard::kMaxText);
}

TEST_CASE("status setters from many threads while JSON is read", "[daemon][status]") {
  StatusBoard s;
  std::vector<std::thread> writers;
  for (uint32_t t = 0; t < 4; ++t)
    writers.emplace_back([&s, t] {
      for (uint64_t i = 0; i < 2000; ++i) {
        s.AddIteration(i, prism::FromMilliseconds(1));
        s.UpdateRealRank(t, i % 2 == 0, "step " + std::to_string(i));
        s.SetCommunicator(Row("c" + std::to_string(i % 300), "DP", 0, i));
        if (i % 100 == 0) s.AddDivergence("d");
        s.SetAlert("a" + std::to_string(t), "x");
      }
    });
  size_t reads = 0;
  for (int i = 0; i < 200; ++i) reads += json::parse(s.Json()).at("real_ranks").size() <= 4;
  for (auto& w : writers) w.join();
  CHECK(reads == 200);
  const json j = json::parse(s.Json());
  CHECK(j.at("real_ranks").size() == 4);
  CHECK(j.at("divergences").at("count") == 80);
}

TEST_CASE("metrics push iteration times and per-kind communicator rows", "[daemon][status]") {
  StatusBoard s;
  prism::server::Metrics m(&s);
  m.OnCollective(prism::graph::ALLREDUCE, prism::graph::COMM_KIND_TP, prism::FromMicroseconds(5), prism::Bytes(1024));
  m.OnCollective(prism::graph::ALLREDUCE, prism::graph::COMM_KIND_TP, prism::FromMicroseconds(5), prism::Bytes(1024));
  m.OnPointToPoint(prism::FromMicroseconds(5), prism::Bytes(10));
  m.OnIteration(0, prism::FromMilliseconds(300));
  const json j = json::parse(s.Json());
  REQUIRE(j.at("iteration_times").size() == 1);
  CHECK(j.at("iteration_times")[0].at("time_s").get<double>() == Approx(0.3));
  REQUIRE(j.at("communicators").size() == 2);
  CHECK(j.at("communicators")[0].at("name") == "all TP");
  CHECK(j.at("communicators")[0].at("ops_done") == 2);
  CHECK(j.at("communicators")[0].at("bytes") == 2048);
  CHECK(j.at("communicators")[1].at("kind") == "P2P");
}

TEST_CASE("the status page is compiled in and reads /status only", "[daemon][status]") {
  const std::string page(prism::server::StatusPageHtml());
  CHECK(page.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(page.find("fetch(\"/status\"") != std::string::npos);
  for (const char* external : {"https://", "//cdn", "<link", "src=", "@import"}) CHECK(page.find(external) == std::string::npos);
  // The only absolute URL is the SVG namespace name, which is never fetched.
  size_t at = 0, urls = 0;
  while ((at = page.find("http://", at)) != std::string::npos) {
    CHECK(page.compare(at, 26, "http://www.w3.org/2000/svg") == 0);
    ++urls, ++at;
  }
  CHECK(urls == 1);
}
