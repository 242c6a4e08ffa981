// The link the plugin times a transfer on, by one fallback rule for every
// caller: the figures prismd's schedule for the operation carries (the
// graph's per-GPU NIC share, docs/network-model.md), else the link the
// settings model (PRISM_LINK_GBPS, PRISM_LINK_LATENCY_US), else the NIC's
// reported speed and latency. A pure function: nothing is shared.
#ifndef PRISM_PLUGIN_MODELLED_LINK_H_
#define PRISM_PLUGIN_MODELLED_LINK_H_

#include "plugin/arrival.h"
#include "plugin/op_schedules.h"
#include "plugin/settings.h"

namespace prism::plugin {

// `schedule` may be null (no schedule for the operation). Bandwidth and
// latency fall back separately: a schedule may carry one and not the other.
VirtualLink ModelledLink(const Settings& settings, const OpSchedule* schedule);

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_MODELLED_LINK_H_
