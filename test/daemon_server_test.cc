// /metrics and /status over real HTTP (libcurl) while a simulation runs in a
// thread; the gRPC Daemon service and extra registered services.
#include <catch2/catch.hpp>
#include <curl/curl.h>
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <regex>
#include <sstream>
#include <thread>

#include "daemon/engine/simulation.h"
#include "daemon/server/daemon_server.h"
#include "daemon/server/http_endpoint.h"
#include "daemon/server/metrics.h"
#include "nlohmann/json.hpp"
#include "proto/prism_service.grpc.pb.h"
#include "test/daemon_test_graphs.h"

namespace {

size_t Append(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

std::string HttpGet(int port, const std::string& path, long* code) {
  CURL* curl = curl_easy_init();
  std::string body;
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + path;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Append);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
  const CURLcode rc = curl_easy_perform(curl);
  *code = 0;
  if (rc == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, code);
  curl_easy_cleanup(curl);
  return body;
}

// Checks the Prometheus text format line by line; returns sample values by name{labels}.
std::map<std::string, double> ParseExposition(const std::string& text, std::set<std::string>* typed) {
  static const std::regex sample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? ([-+]?[0-9.eE+-]+|NaN|[+-]Inf)$)");
  static const std::regex type(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$)");
  std::map<std::string, double> values;
  std::istringstream in(text);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (line.empty() || line.rfind("# HELP ", 0) == 0) continue;
    if (std::regex_match(line, m, type)) {
      typed->insert(m[1]);
      continue;
    }
    INFO("line: " << line);
    REQUIRE(std::regex_match(line, m, sample));
    values[m[1].str() + m[2].str()] = std::stod(m[3]);
  }
  return values;
}

}  // namespace

TEST_CASE("GET /metrics during a long simulation returns valid exposition text", "[daemon][server]") {
  prism::server::StatusBoard status;
  prism::server::Metrics metrics(&status);
  auto http = prism::server::HttpEndpoint::Start("127.0.0.1:0", &metrics, &status);
  REQUIRE(http.ok());
  const int port = (*http)->port();
  REQUIRE(port > 0);
  // ~1.2 s of emulated time, paced to the wall clock.
  const auto gr = prism::testing::CollectiveGraph(64, prism::graph::ALLREDUCE, 1 << 20,
                                                  prism::graph::ALGORITHM_DEFAULT, 60, 20'000'000);
  std::atomic<bool> done{false};
  std::thread sim([&] {
    prism::engine::SimulationOptions o;
    o.realtime = prism::engine::RealtimeOptions();
    o.realtime->mode = prism::engine::RealtimeMode::kBestEffort;
    o.observer = &metrics;
    o.progress_every_events = 1;
    auto r = prism::engine::Simulate(gr, o);
    CHECK(r.ok());
    done = true;
  });
  // Scrape once the run is under way (0.1 s emulated), however loaded the
  // host is; the run itself lasts about a second more.
  long code = 0;
  std::string text;
  bool mid_run = false;
  for (int i = 0; i < 400; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    const bool running = !done;
    text = HttpGet(port, "/metrics", &code);
    std::set<std::string> ignored;
    const auto now = ParseExposition(text, &ignored);
    const auto it = now.find("prism_emulated_time_seconds");
    mid_run = running && !done;
    if (!running || (it != now.end() && it->second > 0.1)) break;
  }
  const std::string status_json = HttpGet(port, "/status", &code);
  sim.join();
  CHECK(mid_run);
  std::set<std::string> typed;
  const auto values = ParseExposition(text, &typed);
  for (const char* name : {"prism_emulated_time_seconds", "prism_iterations_total", "prism_engine_events_total",
                           "prism_engine_lag_seconds", "prism_collective_latency_seconds",
                           "prism_communication_bytes_total", "prism_plugin_sessions", "prism_iteration_time_seconds"})
    CHECK(typed.count(name) == 1);
  CHECK(values.at("prism_emulated_time_seconds") > 0.1);
  CHECK(values.at("prism_engine_events_total") > 0);
  CHECK(values.count("prism_collective_latency_seconds_count{kind=\"allreduce\"}") == 1);
  const auto js = nlohmann::json::parse(status_json);
  CHECK(js["emulated_time_s"].get<double>() > 0);
  long missing = 0;
  HttpGet(port, "/nothing", &missing);
  CHECK(missing == 404);
}

TEST_CASE("hybrid collective outcomes are counted on /metrics", "[daemon][server]") {
  prism::server::StatusBoard status;
  prism::server::Metrics metrics(&status);
  metrics.OnMixedCollective(true);
  metrics.OnMixedCollective(false);
  metrics.OnMixedCollective(false);
  metrics.OnCalibratedCollective();
  const std::string text = metrics.Exposition();
  CHECK(text.find("prism_hybrid_mixed_collectives_total{ended_by=\"virtual\"} 1") != std::string::npos);
  CHECK(text.find("prism_hybrid_mixed_collectives_total{ended_by=\"real\"} 2") != std::string::npos);
  CHECK(text.find("prism_hybrid_calibrated_collectives_total 1") != std::string::npos);
}

TEST_CASE("metrics address in use gives a clear error", "[daemon][server]") {
  prism::server::StatusBoard status;
  prism::server::Metrics metrics(&status);
  auto first = prism::server::HttpEndpoint::Start("127.0.0.1:0", &metrics, &status);
  REQUIRE(first.ok());
  auto second = prism::server::HttpEndpoint::Start("127.0.0.1:" + std::to_string((*first)->port()), &metrics, &status);
  REQUIRE_FALSE(second.ok());
  CHECK(std::string(second.status().message()).find("--metrics-address") != std::string::npos);
  CHECK(std::string(second.status().message()).find("in use") != std::string::npos);
  // Nothing listens on [::1]: the message must not guess "in use".
  auto v6 = prism::server::HttpEndpoint::Start("[::1]:0", &metrics, &status);
  if (!v6.ok()) {
    CHECK(std::string(v6.status().message()).find("in use") == std::string::npos);
    CHECK(std::string(v6.status().message()).find("IPv4") != std::string::npos);
  }
}

namespace {

// A TCP connection to 127.0.0.1:port that sends `prefix` and then nothing.
int HoldConnection(int port, const std::string& prefix) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  if (!prefix.empty()) REQUIRE(write(fd, prefix.data(), prefix.size()) == static_cast<ssize_t>(prefix.size()));
  return fd;
}

}  // namespace

TEST_CASE("the metrics endpoint answers while slow and idle clients hold connections", "[daemon][server]") {
  prism::server::StatusBoard status;
  prism::server::Metrics metrics(&status);
  auto endpoint = prism::server::HttpEndpoint::Start("127.0.0.1:0", &metrics, &status);
  REQUIRE(endpoint.ok());
  const int port = (*endpoint)->port();
  std::vector<int> held;
  for (int i = 0; i < 8; ++i) held.push_back(HoldConnection(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n"));
  for (int i = 0; i < 40; ++i) held.push_back(HoldConnection(port, ""));
  long code = 0;
  const std::string body = HttpGet(port, "/metrics", &code);  // curl gives up after 10 s
  CHECK(code == 200);
  CHECK(body.find("prism_") != std::string::npos);
  for (int fd : held) close(fd);
}

namespace {

class FakeSessions final : public prism::rpc::PluginSession::Service {
  grpc::Status Session(grpc::ServerContext*,
                       grpc::ServerReaderWriter<prism::rpc::DaemonMessage, prism::rpc::PluginMessage>*) override {
    return grpc::Status(grpc::StatusCode::ALREADY_EXISTS, "fake session service");
  }
};

}  // namespace

TEST_CASE("gRPC Daemon service answers Health and Status on a Unix socket, with extra services", "[daemon][server]") {
  prism::server::StatusBoard status;
  status.SetGraph("g", 16, 1);
  prism::server::DaemonServer server(&status);
  FakeSessions sessions;
  REQUIRE(server.RegisterService(&sessions).ok());
  const std::string address = "unix:///tmp/prismd-test-" + std::to_string(getpid()) + ".sock";
  REQUIRE(server.Start(address).ok());
  CHECK_FALSE(server.RegisterService(&sessions).ok());
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto daemon = prism::rpc::Daemon::NewStub(channel);
  {
    grpc::ClientContext ctx;
    prism::rpc::HealthReply reply;
    REQUIRE(daemon->Health(&ctx, prism::rpc::HealthRequest(), &reply).ok());
    CHECK(reply.serving());
  }
  {
    grpc::ClientContext ctx;
    prism::rpc::StatusReply reply;
    REQUIRE(daemon->Status(&ctx, prism::rpc::StatusRequest(), &reply).ok());
    CHECK(nlohmann::json::parse(reply.json())["world_size"] == 16);
  }
  {
    auto stub = prism::rpc::PluginSession::NewStub(channel);
    grpc::ClientContext ctx;
    auto stream = stub->Session(&ctx);
    CHECK(stream->Finish().error_code() == grpc::StatusCode::ALREADY_EXISTS);
  }
  server.Shutdown();
  CHECK(access(address.substr(7).c_str(), F_OK) != 0);  // socket removed
}
