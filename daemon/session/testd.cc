// prism-session-testd: a standalone PluginSession server for the plugin's
// tests and benchmarks (prismd without graph, engine or bootstrap).
//
//   prism-session-testd --listen unix:///tmp/x.sock [--mode link|paced]
//       [--gbps G --latency-us L]                    (link: the default source)
//       [--paced-start-ns T0 --paced-interval-ns D]  (paced: receive k at T0 + k*D)
//       [--window N] [--auto-accept N]
// --auto-accept N connects N virtual senders to every listen comm a plugin
// announces, so its accept() returns virtual receive comms. Prints
// "READY <address>" on stdout once serving; stops on SIGINT/SIGTERM or when
// stdin closes.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>

#include "daemon/session/link_schedule_source.h"
#include "daemon/session/session_service.h"

namespace {

using prism::daemon::ReceiveWindow;
using prism::daemon::SessionId;

class PacedScheduleSource final : public prism::daemon::ScheduleSource {
 public:
  // Receive k may complete at start + k * interval (CLOCK_REALTIME).
  PacedScheduleSource(prism::Nanoseconds start, prism::Nanoseconds interval, uint64_t window)
      : start_(start), interval_(interval), window_(window) {}
  void OnEvents(SessionId id, const prism::rpc::EventBatch& batch, prism::rpc::ScheduleBatch* reply) override {
    std::lock_guard<std::mutex> lock(mu_);
    window_.Advance(
        id, batch,
        [this](prism::rpc::ReceiveSchedule* s) {
          s->set_earliest_ns(static_cast<uint64_t>((start_ + interval_ * static_cast<int64_t>(s->seq())).count()));
        },
        reply);
  }
  void OnSessionClosed(SessionId id) override {
    std::lock_guard<std::mutex> lock(mu_);
    window_.Forget(id);
  }

 private:
  prism::Nanoseconds start_;
  prism::Nanoseconds interval_;
  std::mutex mu_;
  ReceiveWindow window_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"standalone PluginSession server for plugin tests"};
  std::string listen = "unix:///tmp/prism-session-testd.sock";
  std::string mode = "link";
  double gbps = 100, latency_us = 5;
  int64_t paced_start = 0, paced_interval = 10000;
  uint64_t window = 256;
  int auto_accept = 0;
  app.add_option("--listen", listen, "gRPC address to serve");
  app.add_option("--mode", mode, "link | paced")->check(CLI::IsMember({"link", "paced"}));
  app.add_option("--gbps", gbps, "link mode: bandwidth, Gbit/s");
  app.add_option("--latency-us", latency_us, "link mode: latency, us");
  app.add_option("--paced-start-ns", paced_start, "paced mode: CLOCK_REALTIME of receive 0");
  app.add_option("--paced-interval-ns", paced_interval, "paced mode: spacing of receives");
  app.add_option("--window", window, "schedules kept ahead of posted receives");
  app.add_option("--auto-accept", auto_accept, "virtual senders connected per listen comm");
  CLI11_PARSE(app, argc, argv);

  std::unique_ptr<prism::daemon::ScheduleSource> source;
  if (mode == "link") {
    source = std::make_unique<prism::daemon::LinkModelScheduleSource>(
        prism::BitsPerSecond(static_cast<uint64_t>(std::llround(gbps * 1e9))),
        prism::Nanoseconds(std::llround(latency_us * 1e3)), window);
  } else {
    source = std::make_unique<PacedScheduleSource>(prism::Nanoseconds(paced_start), prism::Nanoseconds(paced_interval),
                                                   window);
  }
  prism::daemon::PluginSessionService* service_ptr = nullptr;
  prism::daemon::PluginSessionService::Options options;
  options.daemon_version = "testd";
  options.on_listen = [&service_ptr, auto_accept](SessionId, uint64_t listen_id, int32_t) {
    prism::RealListenHandle h;
    h.listen_id = listen_id;
    for (int i = 0; i < auto_accept; ++i) {
      prism::daemon::VirtualLinkInfo link;
      link.virtual_rank = 1000 + static_cast<uint32_t>(i);
      absl::Status st = service_ptr->broker().ConnectToRealListener(h, link);
      if (!st.ok()) std::cerr << "auto-accept: " << std::string(st.message()) << "\n";
    }
  };
  prism::daemon::PluginSessionService service(options, source.get());
  service_ptr = &service;

  if (listen.rfind("unix:", 0) == 0) {
    std::string path = listen.substr(listen.rfind("unix://", 0) == 0 ? 7 : 5);
    unlink(path.c_str());
  }
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials());
  builder.RegisterService(service.service());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    std::cerr << "prism-session-testd: cannot serve on " << listen << "\n";
    return 1;
  }
  std::cout << "READY " << listen << std::endl;

  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread stdin_watch([] {
    char c;
    while (read(0, &c, 1) > 0) {
    }
    kill(getpid(), SIGTERM);
  });
  stdin_watch.detach();
  int sig = 0;
  sigwait(&set, &sig);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  std::cerr << "prism-session-testd: stopped (" << service.sessions_total() << " sessions)\n";
  return 0;
}
