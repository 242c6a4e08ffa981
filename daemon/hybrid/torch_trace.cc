#include "daemon/hybrid/torch_trace.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace prism::daemon {
namespace {

constexpr char kFormat[] = "prism-torch-trace/1";
constexpr char kPrefix[] = "torch-rank-";

absl::Status Bad(const std::string& path, size_t line, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ":", line, ": ", what,
                                                 " (a torch trace is written by scripts/prism_torch under prism "
                                                 "capture; rerun the capture, or leave --torch-trace out)"));
}

template <typename T>
std::optional<T> Field(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return std::nullopt;
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

absl::Status AddCall(const nlohmann::json& j, TorchTrace& t, const std::string& path, size_t n) {
  TorchCall c;
  const auto number = Field<uint64_t>(j, "op");
  const auto fn = Field<std::string>(j, "fn");
  const auto group = Field<uint32_t>(j, "group");
  if (!number || !fn || !group) return Bad(path, n, "a call without op, fn or group");
  if (*number != t.calls.size()) return Bad(path, n, absl::StrCat("call ", *number, " out of order"));
  if (*group >= t.groups.size()) return Bad(path, n, absl::StrCat("call on group ", *group, ", not described before"));
  c.number = *number;
  c.fn = *fn;
  c.group = *group;
  c.async = Field<bool>(j, "async").value_or(false);
  c.bytes = Field<uint64_t>(j, "bytes").value_or(0);
  c.dtype = Field<std::string>(j, "dtype").value_or("");
  c.peer = Field<int64_t>(j, "peer").value_or(-1);
  c.batch = Field<int64_t>(j, "batch").value_or(-1);
  c.at_ns = Field<int64_t>(j, "t").value_or(0);
  c.allocated = Field<int64_t>(j, "mem");
  c.peak = Field<int64_t>(j, "peak");
  c.side_stream = Field<int64_t>(j, "stream");
  c.batch_last = c.number;
  if (c.batch >= 0 && !t.calls.empty() && t.calls.back().batch == c.batch)
    for (auto it = t.calls.rbegin(); it != t.calls.rend() && it->batch == c.batch; ++it) it->batch_last = c.number;
  t.calls.push_back(std::move(c));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TorchTrace> ReadTorchTrace(const std::string& path) {
  std::ifstream f(path);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  TorchTrace t;
  std::string text;
  size_t n = 0;
  bool header = false;
  while (std::getline(f, text)) {
    ++n;
    if (text.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return Bad(path, n, "not a JSON object");
    if (!header) {
      if (Field<std::string>(j, "format") != kFormat) return Bad(path, n, "the first line is not a prism-torch-trace/1 header");
      const auto rank = Field<int64_t>(j, "rank");
      if (!rank || *rank < 0) return Bad(path, n, "the header names no rank");
      t.rank = static_cast<uint32_t>(*rank);
      header = true;
    } else if (j.contains("op")) {
      if (auto s = AddCall(j, t, path, n); !s.ok()) return s;
    } else if (j.contains("wait")) {
      const auto ops = Field<std::vector<uint64_t>>(j, "wait");
      if (!ops) return Bad(path, n, "a wait without its calls");
      for (uint64_t op : *ops) {
        if (op >= t.calls.size()) return Bad(path, n, absl::StrCat("a wait for call ", op, ", not made before"));
        if (!t.calls[op].waited_before) t.calls[op].waited_before = t.calls.size();
      }
    } else if (j.contains("group")) {
      const auto number = Field<uint32_t>(j, "group");
      const auto ranks = Field<std::vector<uint32_t>>(j, "ranks");
      if (!number || !ranks || *number != t.groups.size()) return Bad(path, n, "a group line out of order or without ranks");
      t.groups.push_back({*number, *ranks, Field<std::string>(j, "backend").value_or("")});
    } else {
      return Bad(path, n, "neither a call, a wait nor a group");
    }
  }
  if (!header) return Bad(path, 1, "empty");
  return t;
}

absl::StatusOr<std::map<uint32_t, TorchTrace>> ReadTorchTraces(const std::string& folder) {
  std::map<uint32_t, TorchTrace> out;
  std::error_code ec;
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::directory_iterator(folder, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kPrefix, 0) == 0 && name.size() > 6 && name.substr(name.size() - 6) == ".jsonl")
      paths.push_back(e.path().string());
  }
  if (ec) return absl::NotFoundError(absl::StrCat("--torch-trace ", folder, ": ", ec.message()));
  std::sort(paths.begin(), paths.end());
  for (const std::string& p : paths) {
    auto t = ReadTorchTrace(p);
    if (!t.ok()) return t.status();
    const uint32_t rank = t->rank;
    out[rank] = std::move(*t);
  }
  if (out.empty())
    return absl::NotFoundError(absl::StrCat("--torch-trace ", folder, ": no torch-rank-<r>.jsonl in it"));
  return out;
}

std::optional<rpc::OpKind> NcclKindOf(const std::string& fn) {
  if (fn == "all_reduce" || fn == "barrier") return rpc::OP_ALL_REDUCE;
  if (fn == "all_gather_into_tensor" || fn == "all_gather") return rpc::OP_ALL_GATHER;
  if (fn == "reduce_scatter_tensor" || fn == "reduce_scatter") return rpc::OP_REDUCE_SCATTER;
  if (fn == "broadcast") return rpc::OP_BROADCAST;
  if (fn == "reduce") return rpc::OP_REDUCE;
  if (fn == "send" || fn == "isend") return rpc::OP_SEND;
  if (fn == "recv" || fn == "irecv") return rpc::OP_RECV;
  return std::nullopt;
}

graph::DType GraphDtypeOf(const std::string& d) {
  static const std::map<std::string, graph::DType> kNames = {
      {"torch.bfloat16", graph::BF16}, {"torch.float16", graph::FP16}, {"torch.float32", graph::FP32},
      {"torch.int32", graph::INT32},   {"torch.int64", graph::INT64},  {"torch.uint8", graph::UINT8},
      {"torch.float8_e4m3fn", graph::FP8}, {"torch.float8_e5m2", graph::FP8}};
  const auto it = kNames.find(d);
  return it == kNames.end() ? graph::DTYPE_UNSPECIFIED : it->second;
}

}  // namespace prism::daemon
