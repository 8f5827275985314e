// The fuzz build's stand-in for OpenMP's header (see CMakeLists.txt,
// TESSERA_FUZZ): clang cannot parse GCC's omp.h, and the library calls only
// these functions of libgomp.
#pragma once

extern "C" void omp_set_num_threads(int num_threads);
extern "C" int omp_get_max_threads(void);
