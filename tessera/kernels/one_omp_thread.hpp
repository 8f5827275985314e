// oneDNN on OpenMP sizes its parallel regions by omp_get_max_threads() of the
// calling thread; one thread keeps all parallelism in the runtime (DESIGN.md
// principle 1: tiles and tasks are tessera's). Set for the duration of each
// call into oneDNN and restored after it: the caller's thread may be another
// library's too (PyTorch sets the main thread's OpenMP thread count, and
// would otherwise get 1 back; oneDNN called there with its 2 would run a
// second team of threads beside tessera's workers). Used by the convolution,
// matrix-product and recurrent kernels.
#pragma once

#include <omp.h>

namespace tessera::kernels {

class OneOpenMPThread {
 public:
  OneOpenMPThread() : saved_(omp_get_max_threads()) {
    if (saved_ != 1) omp_set_num_threads(1);
  }
  ~OneOpenMPThread() {
    if (saved_ != 1) omp_set_num_threads(saved_);
  }
  OneOpenMPThread(const OneOpenMPThread&) = delete;
  OneOpenMPThread& operator=(const OneOpenMPThread&) = delete;

 private:
  int saved_;
};

}  // namespace tessera::kernels
