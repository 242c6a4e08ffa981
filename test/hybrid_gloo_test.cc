// prismd's control plane with a real rank's Gloo group: the store prismd
// hosts passes the rank's reads to the Gloo side (daemon/gloo) beside the NCCL
// rendezvous, the group forms, and /metrics counts it.
#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/hybrid/control_plane.h"
#include "daemon/server/metrics.h"
#include "test/daemon_test_graphs.h"
#include "test/free_port.h"
#include "test/gloo_fake_rank.h"

namespace prism::daemon {
namespace {

bool Eventually(const std::function<bool()>& pred) {
  for (int i = 0; i < 1000; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

TEST_CASE("control plane: a real rank's Gloo group forms through prismd's store and /metrics counts it",
          "[hybrid][gloo]") {
  const graph::Graph g = prism::testing::CollectiveGraph(8, graph::ALLREDUCE, 1 << 20);
  server::Metrics metrics;
  ControlPlaneOptions o;
  o.real_ranks = {0};
  const uint16_t port = prism::testing::FreeLoopbackPort();
  o.torch_store = absl::StrCat("127.0.0.1:", port);
  auto cp = ControlPlane::Create(g, o, &metrics, nullptr);
  REQUIRE(cp.ok());
  REQUIRE((*cp)->Start().ok());
  {
    gloo::testing::FakeGlooOptions r;
    r.store_port = port;
    r.rank = 0;
    r.size = 8;
    gloo::testing::FakeGlooRank rank(r);  // the default group's Gloo backend, env://
    rank.Rendezvous();
    rank.Barrier(0);
    std::vector<float> data(64, 1.0f);
    rank.Allreduce(data, 1);
  }
  CHECK(Eventually([&] {
    return absl::StrContains(metrics.Exposition(), "prism_gloo_events_total{kind=\"pairs_opened\"} 7");
  }));
  CHECK(absl::StrContains(metrics.Exposition(), "prism_gloo_events_total{kind=\"records_published\"} 7"));
  CHECK(absl::StrContains(metrics.Exposition(), "prism_gloo_events_total{kind=\"pairs_failed\"} 0"));
  (*cp)->Stop();
}

}  // namespace
}  // namespace prism::daemon
