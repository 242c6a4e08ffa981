#include "plugin/modelled_link.h"

namespace prism::plugin {

VirtualLink ModelledLink(const Settings& settings, const OpSchedule* schedule) {
  VirtualLink link;
  if (schedule != nullptr && schedule->link_bits_per_second > 0)
    link.bandwidth = BitsPerSecond(schedule->link_bits_per_second);
  else if (settings.link_bits_per_second > 0)
    link.bandwidth = BitsPerSecond(settings.link_bits_per_second);
  else
    link.bandwidth = BitsPerSecond(static_cast<uint64_t>(settings.nic.speed_mbps) * 1000000ull);
  if (schedule != nullptr && schedule->link_latency_ns >= 0)
    link.latency = Nanoseconds(schedule->link_latency_ns);
  else if (settings.link_latency_ns > 0)
    link.latency = Nanoseconds(settings.link_latency_ns);
  else
    link.latency = Nanoseconds(static_cast<int64_t>(settings.nic.latency_us * 1000.0f));
  return link;
}

}  // namespace prism::plugin
