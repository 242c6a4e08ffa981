// plugin/modelled_link.h: the one fallback rule for the link a transfer is
// timed on (schedule, then the PRISM_LINK_* settings, then the NIC), and a
// job whose nodes have fewer NICs than GPUs: prismd's schedule carries the
// per-GPU share (docs/network-model.md, "NIC bandwidth: per GPU"), and that
// share, not the NIC's own speed, is what the plugin times on.
#include <catch2/catch.hpp>

#include "plugin/modelled_link.h"

using prism::BitsPerSecond;
using prism::Nanoseconds;
using prism::plugin::ModelledLink;
using prism::plugin::OpSchedule;
using prism::plugin::Settings;

namespace {

Settings NicOnly() {
  Settings s;
  s.nic.speed_mbps = 400'000;  // one 400 Gbit/s NIC as reported to NCCL
  s.nic.latency_us = 2.0f;
  return s;
}

}  // namespace

TEST_CASE("modelled link: the NIC's reported figures when nothing else is set", "[plugin][link]") {
  const auto link = ModelledLink(NicOnly(), nullptr);
  CHECK(link.bandwidth == BitsPerSecond(400'000'000'000ull));
  CHECK(link.latency == Nanoseconds(2'000));
}

TEST_CASE("modelled link: the settings' link comes before the NIC", "[plugin][link]") {
  Settings s = NicOnly();
  s.link_bits_per_second = 100'000'000'000ull;
  s.link_latency_ns = 5'000;
  const auto link = ModelledLink(s, nullptr);
  CHECK(link.bandwidth == BitsPerSecond(100'000'000'000ull));
  CHECK(link.latency == Nanoseconds(5'000));
}

TEST_CASE("modelled link: 4 NICs for 8 GPUs, the schedule's per-GPU share wins over the NIC and the settings",
          "[plugin][link]") {
  Settings s = NicOnly();
  s.link_bits_per_second = 100'000'000'000ull;
  OpSchedule sched;
  sched.link_bits_per_second = 200'000'000'000ull;  // 4 x 400 Gbit/s over 8 GPUs
  sched.link_latency_ns = 3'000;
  const auto link = ModelledLink(s, &sched);
  CHECK(link.bandwidth == BitsPerSecond(200'000'000'000ull));
  CHECK(link.latency == Nanoseconds(3'000));
  // A schedule without figures falls back figure by figure.
  OpSchedule none;
  const auto own = ModelledLink(s, &none);
  CHECK(own.bandwidth == BitsPerSecond(100'000'000'000ull));
  CHECK(own.latency == Nanoseconds(2'000));
}
