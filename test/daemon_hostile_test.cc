// Truncated, corrupt and hostile graphs: clear errors, never a crash or hang.
// Also the prismd binary end to end (exit codes, --json).
#include <catch2/catch.hpp>

#include "daemon/session/session_service.h"
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <google/protobuf/stubs/logging.h>

#include "common/limits.h"
#include "test/run_command.h"
#include "daemon/engine/simulation.h"
#include "nlohmann/json.hpp"
#include "proto/graph_file.h"
#include "proto/prism_service.grpc.pb.h"
#include "test/daemon_test_graphs.h"
#include "test/free_port.h"

namespace {

namespace g = prism::graph;

absl::Status Run(const g::Graph& gr) {
  prism::engine::SimulationOptions o;
  o.iterations = 1;
  auto r = prism::engine::Simulate(gr, o);
  return r.ok() ? absl::OkStatus() : r.status();
}

void ExpectError(const g::Graph& gr, const std::string& words) {
  const absl::Status s = Run(gr);
  INFO(s.message());
  REQUIRE_FALSE(s.ok());
  CHECK(std::string(s.message()).find(words) != std::string::npos);
}

g::Graph TwoComms() {
  return prism::testing::CollectiveGraph(8, g::ALLREDUCE, 1 << 20, g::ALGORITHM_RING, 1, 1000);
}

std::string TempPath(const std::string& name) { return "/tmp/prism-daemon-test-" + std::to_string(getpid()) + name; }

std::pair<int, std::string> Prismd(const std::string& args) {
  return prism::testing::RunCommand(std::string(PRISMD_PATH) + " " + args, TempPath(".out"));
}

}  // namespace

TEST_CASE("a collective not every member reaches stalls with a clear error", "[daemon][hostile]") {
  g::Graph gr = TwoComms();
  g::Program lazy = gr.programs(0);
  lazy.set_id(1);
  lazy.clear_ops();
  *gr.add_programs() = lazy;
  gr.mutable_ranks(3)->set_program(1);
  ExpectError(gr, "stalled");
}

TEST_CASE("cross-ordered collectives on two communicators deadlock into a clear error", "[daemon][hostile]") {
  g::Graph gr = TwoComms();
  auto* second = gr.add_communicators();
  *second = gr.communicators(0);
  second->set_id(1);
  g::Program p = gr.programs(0);
  p.add_comm_slot_names("other");
  p.clear_ops();
  for (uint32_t slot : {0u, 1u}) {
    auto* op = p.add_ops()->mutable_collective();
    op->set_comm_slot(slot), op->set_kind(g::ALLREDUCE), op->set_bytes(1024);
  }
  g::Program q = p;
  q.set_id(1);
  q.mutable_ops(0)->mutable_collective()->set_comm_slot(1);
  q.mutable_ops(1)->mutable_collective()->set_comm_slot(0);
  *gr.mutable_programs(0) = p;
  *gr.add_programs() = q;
  for (int r = 0; r < gr.ranks_size(); ++r) {
    gr.mutable_ranks(r)->add_comm_slots(1);
    if (r == 5) gr.mutable_ranks(r)->set_program(1);
  }
  ExpectError(gr, "stalled");
  g::Graph unmatched = TwoComms();  // a send whose receive never comes
  auto* send = unmatched.mutable_programs(0)->add_ops()->mutable_send();
  send->set_peer(1), send->set_peer_relative(true), send->set_bytes(10);
  ExpectError(unmatched, "stalled");
}

TEST_CASE("links that cannot carry a communicator are refused", "[daemon][hostile]") {
  prism::testing::ClusterSpec no_nic;
  no_nic.nics_per_node = 0;
  ExpectError(prism::testing::CollectiveGraph(16, g::ALLREDUCE, 1024, g::ALGORITHM_RING, 1, 0, no_nic), "NIC");
  prism::testing::ClusterSpec no_nvlink;
  no_nvlink.nvlink_bps = 0;
  ExpectError(prism::testing::CollectiveGraph(8, g::ALLREDUCE, 1024, g::ALGORITHM_RING, 1, 0, no_nvlink), "intra_node");
}

TEST_CASE("huge sizes, durations and stream ids saturate or are refused", "[daemon][hostile]") {
  g::Graph gr = prism::testing::CollectiveGraph(16, g::ALLREDUCE, UINT64_MAX, g::ALGORITHM_RING, 3, UINT64_MAX);
  ExpectError(gr, "limit");  // refused at load: a silently wrong result otherwise
  gr = prism::testing::CollectiveGraph(16, g::ALLREDUCE, prism::limits::kMaxOpBytes, g::ALGORITHM_RING, 3,
                                       prism::limits::kMaxOpDurationNs);
  CHECK(Run(gr).ok());  // the largest accepted values replay
  g::Graph streams = TwoComms();
  streams.mutable_programs(0)->set_streams(UINT32_MAX);
  CHECK(Run(streams).ok());  // declared but unused streams cost nothing
  streams.mutable_programs(0)->mutable_ops(0)->set_stream(UINT32_MAX - 1);
  ExpectError(streams, "streams");
  g::Graph attr = TwoComms();
  (*attr.mutable_job()->mutable_attributes())["iterations"] = "many";
  CHECK_FALSE(prism::engine::IterationsFor(attr, 0).ok());
  (*attr.mutable_job()->mutable_attributes())["iterations"] = "99999999999";
  CHECK_FALSE(prism::engine::IterationsFor(attr, 0).ok());
}

TEST_CASE("truncated and bit-flipped graph files give errors, never crashes", "[daemon][hostile]") {
  prism::testing::TrainingSpec s;
  s.tp = 2, s.pp = 2, s.dp = 2, s.microbatches = 3, s.layers_per_stage = 1;
  s.cluster.gpus_per_node = 2;
  google::protobuf::LogSilencer quiet;  // corrupt strings make protobuf log; the Status is what counts
  auto bytes = g::EncodeGraph(prism::testing::TrainingGraph(s));
  REQUIRE(bytes.ok());
  for (size_t cut : {size_t{0}, size_t{8}, size_t{16}, bytes->size() / 2, bytes->size() - 1}) {
    auto decoded = g::DecodeGraph(std::string_view(*bytes).substr(0, cut));
    if (decoded.ok()) Run(*decoded).IgnoreError();  // a prefix may parse; it must not crash
    else CHECK_FALSE(decoded.status().message().empty());
  }
  std::mt19937 rng(12345);
  int rejected = 0;
  for (int i = 0; i < 400; ++i) {
    std::string mutated = *bytes;
    for (int k = 0; k < 4; ++k) mutated[16 + rng() % (mutated.size() - 16)] = static_cast<char>(rng());
    auto decoded = g::DecodeGraph(mutated);
    if (!decoded.ok()) {
      ++rejected;
      continue;
    }
    Run(*decoded).IgnoreError();
  }
  CHECK(rejected > 0);
}

TEST_CASE("prismd exits non-zero with a message on bad files and prints JSON on good ones", "[daemon][hostile]") {
  const std::string garbage = TempPath(".garbage");
  std::ofstream(garbage) << "not a graph at all";
  auto [rc, text] = Prismd("--graph " + garbage + " --simulate --metrics-address none");
  CHECK(rc == 1);
  CHECK(text.find("not a Prism graph file") != std::string::npos);
  auto [rc2, text2] = Prismd("--graph /nonexistent/g --simulate --metrics-address none");
  CHECK(rc2 == 1);
  CHECK(text2.find("cannot open") != std::string::npos);
  const std::string good = TempPath(".graph");
  REQUIRE(g::WriteGraphFile(TwoComms(), good).ok());
  auto [rc3, text3] = Prismd("--graph " + good + " --simulate --json --iterations 2 --metrics-address none");
  CHECK(rc3 == 0);
  const auto j = nlohmann::json::parse(text3);
  CHECK(j["iterations"] == 2);
  CHECK(j["iteration_time_s"].get<double>() > 0);
  auto [rc4, text4] = Prismd("--graph " + good + " --simulate --trace-ranks 99 --trace x --metrics-address none");
  CHECK(rc4 == 2);  // a usage error
  CHECK(text4.find("outside") != std::string::npos);
  auto [rc5, text5] = Prismd("--graph " + good + " --simulate --json --nic-model shared --metrics-address none");
  CHECK(rc5 == 0);
  CHECK(nlohmann::json::parse(text5)["iteration_time_s"].get<double>() > 0);
  auto [rc6, text6] = Prismd("--graph " + good + " --simulate --nic-model fair --metrics-address none");
  CHECK(rc6 == 2);
  CHECK(text6.find("--nic-model fair: queues, calendar, shared, interleave or turns") != std::string::npos);
  auto [rc7, text7] = Prismd("--graph " + good + " --simulate --json --nic-model calendar --metrics-address none");
  CHECK(rc7 == 0);
  CHECK(nlohmann::json::parse(text7)["iteration_time_s"].get<double>() > 0);
  // NCCL's step cost and NCCL_ALGO: shown in the report, bad values refused with the choices.
  auto [rc8, text8] = Prismd("--graph " + good + " --simulate --json --metrics-address none --nccl-algo Ring");
  CHECK(rc8 == 0);
  const auto j8 = nlohmann::json::parse(text8);
  CHECK(j8["nccl_step_cost_us"].get<double>() == 12.5);
  CHECK(j8["nccl_step_cost_source"].get<std::string>().find("NCCL 2.28.9 Simple ring") != std::string::npos);
  CHECK(j8["nccl_algo"] == "Ring");
  auto [rc9, text9] = Prismd("--graph " + good + " --simulate --metrics-address none --step-cost-us 3");
  CHECK(rc9 == 0);
  CHECK(text9.find("NCCL step cost: 3.00 us per ring step (--step-cost-us)") != std::string::npos);
  // A packed host's turnarounds: in the report when set, in its JSON always.
  auto [rc30, text30] = Prismd("--graph " + good + " --simulate --metrics-address none --collective-turnaround-us 450");
  CHECK(rc30 == 0);
  CHECK(text30.find("ring collective turnaround: 450.00 us per collective across nodes") != std::string::npos);
  CHECK(text9.find("ring collective turnaround") == std::string::npos);
  auto [rc31, text31] = Prismd("--graph " + good + " --simulate --json --metrics-address none --collective-turnaround-us 450");
  CHECK(rc31 == 0);
  CHECK(nlohmann::json::parse(text31)["nccl_collective_turnaround_us"].get<double>() == 450.0);
  CHECK(j8["nccl_collective_turnaround_us"].get<double>() == 0.0);
  const std::string trace = TempPath(".json");
  auto [rc12, text12] = Prismd("--graph " + good + " --simulate --metrics-address none --step-cost-us 3 --trace " + trace);
  CHECK(rc12 == 0);
  std::ifstream trace_in(trace);
  const auto tj = nlohmann::json::parse(trace_in);
  CHECK(tj["metadata"]["nccl_step_cost_us"].get<double>() == 3.0);
  CHECK(tj["metadata"]["nccl_step_cost_source"] == "--step-cost-us");
  std::remove(trace.c_str());
  auto [rc10, text10] = Prismd("--graph " + good + " --simulate --metrics-address none --step-cost-us -1");
  CHECK(rc10 == 2);
  CHECK(text10.find("--step-cost-us -1: auto or microseconds from 0 to 1000") != std::string::npos);
  auto [rc11, text11] = Prismd("--graph " + good + " --simulate --metrics-address none --nccl-algo Rign");
  CHECK(rc11 == 2);
  CHECK(text11.find("--nccl-algo: NCCL_ALGO \"Rign\": unknown algorithm") != std::string::npos);
  // NCCL's algorithm choice: in the report per collective kind; NCCL_PROTO
  // and the choice's source checked.
  CHECK(j8["algorithm_choice"] == "NCCL 2.28.9's tuning");
  REQUIRE(!j8["algorithms"].empty());
  CHECK(j8["algorithms"][0]["calls_per_iteration"].get<uint64_t>() > 0);
  auto [rc13, text13] = Prismd("--graph " + good + " --simulate --metrics-address none --nccl-proto LL256");
  CHECK(rc13 == 2);
  CHECK(text13.find("--nccl-proto: NCCL_PROTO \"LL256\": unknown protocol") != std::string::npos);
  auto [rc14, text14] = Prismd("--graph " + good + " --simulate --metrics-address none --algorithm-choice best");
  CHECK(rc14 == 2);
  CHECK(text14.find("--algorithm-choice best: nccl (NCCL 2.28.9's tuning) or model") != std::string::npos);
  auto [rc15, text15] =
      Prismd("--graph " + good + " --simulate --metrics-address none --algorithm-choice model --nccl-proto Simple");
  CHECK(rc15 == 0);
  CHECK(text15.find("collective algorithms (the model's formulas;") != std::string::npos);
  std::remove(garbage.c_str());
  std::remove(good.c_str());
}

namespace {

// prismd in hybrid mode on `graph`, gRPC on unix://`sock`, stderr silenced,
// with `extra` flags.
pid_t StartHybridPrismd(const std::string& graph, const std::string& sock, const char* metrics,
                        std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {PRISMD_PATH, "--graph", graph, "--listen", "unix://" + sock,
                                   "--metrics-address", metrics};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 2);
    execv(PRISMD_PATH, argv.data());
    _exit(127);
  }
  return pid;
}

// PluginSession.Announce of NCCL `nccl_version`, waiting for prismd to come up.
grpc::Status Announce(prism::rpc::PluginSession::Stub& stub, int nccl_version) {
  grpc::ClientContext ctx;
  ctx.set_wait_for_ready(true);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  prism::rpc::Hello hello;
  hello.set_protocol_version(prism::daemon::kSessionProtocolVersion);
  hello.set_nccl_version(nccl_version);
  hello.set_rank(0);
  prism::rpc::Welcome welcome;
  return stub.Announce(&ctx, hello, &welcome);
}

}  // namespace

TEST_CASE("prismd in hybrid mode serves gRPC and /status until SIGTERM, then exits cleanly", "[daemon][server]") {
  const std::string graph = TempPath(".hybrid.graph");
  REQUIRE(g::WriteGraphFile(TwoComms(), graph).ok());
  const std::string sock = TempPath(".sock");
  const pid_t pid = StartHybridPrismd(graph, sock, "none");
  REQUIRE(pid > 0);
  auto channel = grpc::CreateChannel("unix://" + sock, grpc::InsecureChannelCredentials());
  auto stub = prism::rpc::Daemon::NewStub(channel);
  prism::rpc::StatusReply reply;
  bool answered = false;
  {
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(true);  // until prismd listens
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    answered = stub->Status(&ctx, prism::rpc::StatusRequest(), &reply).ok();
  }
  CHECK(answered);
  if (answered) CHECK(nlohmann::json::parse(reply.json())["mode"] == "hybrid");
  kill(pid, SIGTERM);
  int wstatus = 0;
  REQUIRE(waitpid(pid, &wstatus, 0) == pid);
  CHECK(WIFEXITED(wstatus));
  CHECK(WEXITSTATUS(wstatus) == 0);
  CHECK(access(sock.c_str(), F_OK) != 0);
  std::remove(graph.c_str());
}

TEST_CASE("graphs whose replay state would exhaust memory are refused before allocating", "[daemon][hostile]") {
  // 65536 ranks x 8192 ops each = 2^29 op counters without classes.
  g::Graph gr = prism::testing::CollectiveGraph(65536, g::ALLREDUCE, 1024, g::ALGORITHM_RING, 4096, 1);
  prism::engine::SimulationOptions o;
  o.use_classes = false;
  auto r = prism::engine::Simulate(gr, o);
  REQUIRE_FALSE(r.ok());
  CHECK(std::string(r.status().message()).find("drop --no-classes") != std::string::npos);
  o.use_classes = true;  // one class: cheap
  CHECK(prism::engine::Simulate(gr, o).ok());
}

TEST_CASE("a replay whose clock saturates is an error, never a result", "[daemon][hostile]") {
  // The slowest links allowed (1 Gbit/s): a ring all-reduce of 1 TiB over 16
  // ranks takes 16,492 s; 300,000 of them pass the engine's 2^62 ns clock.
  prism::testing::ClusterSpec slow;
  slow.nic_bps = prism::limits::kMinBandwidthBps;
  slow.nvlink_bps = prism::limits::kMinBandwidthBps;
  const g::Graph gr = prism::testing::CollectiveGraph(16, g::ALLREDUCE, prism::limits::kMaxOpBytes,
                                                      g::ALGORITHM_RING, 300'000, 0, slow);
  REQUIRE(g::ValidateGraph(gr).ok());  // every figure is inside the limits; only the sum overflows
  ExpectError(gr, "clock");
}

TEST_CASE("crafted graphs are refused by the engine too (durations, kinds, unmatched sizes)", "[daemon][hostile]") {
  g::Graph durations = TwoComms();
  auto* p = durations.mutable_programs(0);
  p->mutable_ops(0)->mutable_compute()->set_duration_ns(UINT64_MAX);  // 2^64-1 ns: a 0 s iteration before
  ExpectError(durations, "duration");
  g::Graph kind = TwoComms();
  kind.mutable_programs(0)->mutable_ops(1)->mutable_collective()->set_kind(static_cast<g::CollectiveKind>(99));
  ExpectError(kind, "kind 99");
  g::Graph sizes = TwoComms();
  auto* q = sizes.mutable_programs(0);
  q->add_ops()->mutable_group_start();
  auto* send = q->add_ops()->mutable_send();
  send->set_peer(1), send->set_peer_relative(true), send->set_bytes(4096);
  auto* recv = q->add_ops()->mutable_recv();
  recv->set_peer(7), recv->set_peer_relative(true), recv->set_bytes(100);
  q->add_ops()->mutable_group_end();
  ExpectError(sizes, "4096");
}

TEST_CASE("prismd in hybrid mode stops promptly on SIGTERM with a live plugin session", "[daemon][server]") {
  const std::string graph = TempPath(".live.graph");
  REQUIRE(g::WriteGraphFile(TwoComms(), graph).ok());
  const std::string sock = TempPath(".live.sock");
  const pid_t pid = StartHybridPrismd(graph, sock, "127.0.0.1:0");
  REQUIRE(pid > 0);
  auto channel = grpc::CreateChannel("unix://" + sock, grpc::InsecureChannelCredentials());
  auto stub = prism::rpc::PluginSession::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_wait_for_ready(true);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto stream = stub->Session(&ctx);
  prism::rpc::PluginMessage hello;
  hello.mutable_hello()->set_protocol_version(prism::daemon::kSessionProtocolVersion);
  REQUIRE(stream->Write(hello));
  prism::rpc::DaemonMessage welcome;
  REQUIRE(stream->Read(&welcome));  // the session is live
  CHECK(welcome.has_welcome());
  // The ring's lockstep for the plugin: prismd's default step cost (--step-cost-us auto).
  CHECK(welcome.welcome().ring_step_cost_ns() == 12'500);
  const auto start = std::chrono::steady_clock::now();
  kill(pid, SIGTERM);
  int wstatus = 0;
  REQUIRE(waitpid(pid, &wstatus, 0) == pid);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  WARN("prismd exited " << ms.count() << " ms after SIGTERM with a live session (a figure, not a check)");
  CHECK(WIFEXITED(wstatus));
  CHECK(WEXITSTATUS(wstatus) == 0);
  CHECK(access(sock.c_str(), F_OK) != 0);
  stream->WritesDone();
  ctx.TryCancel();
  std::remove(graph.c_str());
}

TEST_CASE("prismd refuses a plugin session from another NCCL than its wire profile, naming the fix",
          "[daemon][server]") {
  const std::string graph = TempPath(".ver.graph");
  REQUIRE(g::WriteGraphFile(TwoComms(), graph).ok());
  const std::string sock = TempPath(".ver.sock");
  const pid_t pid = StartHybridPrismd(graph, sock, "127.0.0.1:0", {"--wire-profile", "22809"});
  REQUIRE(pid > 0);
  auto channel = grpc::CreateChannel("unix://" + sock, grpc::InsecureChannelCredentials());
  auto stub = prism::rpc::PluginSession::NewStub(channel);
  auto open = [&](int nccl_version, prism::rpc::DaemonMessage* first) {
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(true);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    auto stream = stub->Session(&ctx);
    prism::rpc::PluginMessage hello;
    hello.mutable_hello()->set_protocol_version(prism::daemon::kSessionProtocolVersion);
    hello.mutable_hello()->set_nccl_version(nccl_version);
    REQUIRE(stream->Write(hello));
    REQUIRE(stream->Read(first));
    stream->WritesDone();
    ctx.TryCancel();
  };
  prism::rpc::DaemonMessage first;
  open(23007, &first);
  REQUIRE(first.has_error());
  CHECK(first.error().message().find("NCCL 2.30.7") != std::string::npos);
  CHECK(first.error().message().find("--wire-profile 23007") != std::string::npos);
  open(22809, &first);  // the NCCL it plays
  CHECK(first.has_welcome());
  open(0, &first);  // a plugin that could not tell
  CHECK(first.has_welcome());
  const grpc::Status announced = Announce(*stub, 23007);
  CHECK(announced.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(announced.error_message().find("--wire-profile 23007") != std::string::npos);
  CHECK(Announce(*stub, 22809).ok());
  kill(pid, SIGTERM);
  int wstatus = 0;
  REQUIRE(waitpid(pid, &wstatus, 0) == pid);
  std::remove(graph.c_str());
}

TEST_CASE("prismd without --wire-profile plays the NCCL the first rank announces, refusing others with the fix",
          "[daemon][server]") {
  const std::string graph = TempPath(".learn.graph");
  REQUIRE(g::WriteGraphFile(TwoComms(), graph).ok());
  const std::string sock = TempPath(".learn.sock");
  const uint16_t comm_id_port = prism::testing::FreeLoopbackPort();
  REQUIRE(comm_id_port != 0);
  const pid_t pid = StartHybridPrismd(graph, sock, "127.0.0.1:0",
                                      {"--real-ranks", "0", "--nccl-comm-id",
                                       "127.0.0.1:" + std::to_string(comm_id_port)});
  REQUIRE(pid > 0);
  auto channel = grpc::CreateChannel("unix://" + sock, grpc::InsecureChannelCredentials());
  auto stub = prism::rpc::PluginSession::NewStub(channel);
  // A release with no verified profile: refused at once, naming the supported ones.
  const grpc::Status old = Announce(*stub, 22105);
  CHECK(old.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(old.error_message().find("2.21.5") != std::string::npos);
  CHECK(old.error_message().find("2.28.9") != std::string::npos);
  const grpc::Status unknown = Announce(*stub, 30001);
  CHECK(unknown.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(unknown.error_message().find("no wire profile") != std::string::npos);
  // The first supported one is chosen; the same again is fine.
  const grpc::Status first = Announce(*stub, 23007);
  CHECK(first.ok());
  CHECK(Announce(*stub, 23007).ok());
  // Another release after that: refused, naming both.
  const grpc::Status other = Announce(*stub, 22707);
  CHECK(other.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(other.error_message().find("2.27.7") != std::string::npos);
  CHECK(other.error_message().find("2.30.7") != std::string::npos);
  kill(pid, SIGTERM);
  int wstatus = 0;
  REQUIRE(waitpid(pid, &wstatus, 0) == pid);
  CHECK(WIFEXITED(wstatus));
  std::remove(graph.c_str());
}

namespace {

struct Run2 {
  int rc = -1;
  std::string out, err;
};

// prismd with stdout and stderr apart.
Run2 PrismdApart(const std::string& args) {
  const std::string out = TempPath(".stdout"), err = TempPath(".stderr");
  const int rc = std::system((std::string(PRISMD_PATH) + " " + args + " >" + out + " 2>" + err).c_str());
  auto slurp = [](const std::string& path) {
    std::ifstream f(path);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::remove(path.c_str());
    return text;
  };
  return Run2{WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc), slurp(out), slurp(err)};
}

}  // namespace

TEST_CASE("prismd --simulate checks --trace before the replay and prints the report whatever the trace",
          "[daemon][hostile]") {
  const std::string good = TempPath(".trace.graph");
  REQUIRE(g::WriteGraphFile(TwoComms(), good).ok());
  Run2 r = PrismdApart("--graph " + good + " --simulate --metrics-address none --trace /nonexistent-dir/t.json");
  INFO(r.err);
  CHECK(r.rc == 1);
  CHECK(r.err.find("--trace") != std::string::npos);
  CHECK(r.err.find("does not exist") != std::string::npos);
  CHECK(r.out.empty());  // refused before the replay
  // A name the check accepts but whose temporary ("<name>.tmp.<pid>") is too
  // long for the file system: the trace fails after the replay.
  const std::string dir = std::filesystem::path(TempPath(".x")).parent_path().string();
  const std::string trace = dir + "/" + std::string(250, 't');
  r = PrismdApart("--graph " + good + " --simulate --metrics-address none --trace " + trace);
  INFO(r.err);
  CHECK(r.rc == 1);
  CHECK(r.out.find("predicted iteration time") != std::string::npos);  // the report came first
  CHECK(r.err.find("trace") != std::string::npos);
  std::remove(good.c_str());
}

TEST_CASE("SIGTERM during prismd --simulate prints the partial report and removes the --listen socket",
          "[daemon][hostile]") {
  // A replay of hours: 10^6 iterations of 1000 all-reduces.
  const std::string graph = TempPath(".long.graph");
  REQUIRE(g::WriteGraphFile(prism::testing::CollectiveGraph(8, g::ALLREDUCE, 1 << 20, g::ALGORITHM_RING, 1000, 1000),
                            graph).ok());
  const std::string sock = TempPath(".sim.sock");
  const std::string out = TempPath(".sim.out");
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 1);
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 2);
    execl(PRISMD_PATH, PRISMD_PATH, "--graph", graph.c_str(), "--simulate", "--iterations", "1000000",
          "--listen", ("unix://" + sock).c_str(), "--metrics-address", "none", static_cast<char*>(nullptr));
    _exit(127);
  }
  {
    auto stub = prism::rpc::Daemon::NewStub(grpc::CreateChannel("unix://" + sock, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(true);  // until prismd listens: the replay starts right after
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    prism::rpc::HealthReply reply;
    REQUIRE(stub->Health(&ctx, prism::rpc::HealthRequest(), &reply).ok());
  }
  kill(pid, SIGTERM);
  int wstatus = 0;
  REQUIRE(waitpid(pid, &wstatus, 0) == pid);
  std::ifstream f(out);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  INFO(text);
  CHECK(WIFEXITED(wstatus));
  CHECK(WEXITSTATUS(wstatus) == 128 + SIGTERM);
  CHECK(text.find("STOPPED after") != std::string::npos);
  CHECK(text.find("of 1000000 iteration(s)") != std::string::npos);
  CHECK(access(sock.c_str(), F_OK) != 0);
  std::remove(out.c_str());
  std::remove(graph.c_str());
}

TEST_CASE("prismd refuses --iterations 0, a negative --lag-limit-ms and a --spin-us past 10 ms", "[daemon][hostile]") {
  const std::string good = TempPath(".cli.graph");
  REQUIRE(g::WriteGraphFile(TwoComms(), good).ok());
  Run2 r = PrismdApart("--graph " + good + " --simulate --metrics-address none --iterations 0");
  INFO(r.err);
  CHECK(r.rc == 2);
  CHECK(r.err.find("--iterations") != std::string::npos);
  CHECK(r.out.empty());
  r = PrismdApart("--graph " + good + " --simulate --metrics-address none --lag-limit-ms -5 --realtime hard-limit");
  INFO(r.err);
  CHECK(r.rc == 2);
  CHECK(r.err.find("--lag-limit-ms") != std::string::npos);
  r = PrismdApart("--graph " + good + " --simulate --metrics-address none --iterations -1");
  CHECK(r.rc != 0);
  CHECK(r.err.find("--iterations") != std::string::npos);
  r = PrismdApart("--graph " + good + " --simulate --metrics-address none --spin-us 20000 --realtime best-effort");
  INFO(r.err);
  CHECK(r.rc == 2);
  CHECK(r.err.find("--spin-us must be 0 to 10000") != std::string::npos);
  std::remove(good.c_str());
}
