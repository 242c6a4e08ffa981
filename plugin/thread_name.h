// Names for the plugin's threads, so that top, perf and
// bench/fidelity/thread_cpu.py tell them from NCCL's and PyTorch's.
#ifndef PRISM_PLUGIN_THREAD_NAME_H_
#define PRISM_PLUGIN_THREAD_NAME_H_

#include <pthread.h>

namespace prism::plugin {

// Names the calling thread (Linux keeps 15 characters; longer names are
// cut). Best effort: a failure leaves the inherited name. Thread-safe.
inline void NameThisThread(const char* name) {
  char cut[16] = {};
  for (int i = 0; i < 15 && name[i] != '\0'; ++i) cut[i] = name[i];
  pthread_setname_np(pthread_self(), cut);
}

}  // namespace prism::plugin

#endif  // PRISM_PLUGIN_THREAD_NAME_H_
