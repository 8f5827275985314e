#pragma once

namespace tessera::python {

// Records the interpreter's main thread (at import, with the GIL held).
void init_sigint(unsigned long main_thread);

// Brackets one run from Python (constructed with the GIL held): clears the
// interrupt flag and, on the main thread, keeps tessera's SIGINT handler in
// front of Python's so Ctrl-C stops a long run (see sigint.cpp).
class SigintWatch {
 public:
  SigintWatch();
  ~SigintWatch();
  SigintWatch(const SigintWatch&) = delete;
  SigintWatch& operator=(const SigintWatch&) = delete;

 private:
  bool main_;
};

}  // namespace tessera::python
