// A stand-in for libpstrain_cuda.so from another pstrain build, for
// tests/gpu_module_test.sh: its entry point (src/gpu/backend.h) refuses
// every front, as a real module built from other sources does.
extern "C" __attribute__((visibility("default"))) const void* pstrain_gpu_backend(
    const char* /*front_key*/, const char** module_key) {
  *module_key = "pstrain 0.0.0, a test's stand-in";
  return nullptr;
}
