/*
 * malloc_trim(0) for Node: gives the free pages inside glibc's heaps back to the system.
 * glibc's free() returns memory only from the top of the main heap; what is freed below a live
 * allocation stays resident until malloc_trim. On a C library other than glibc the module exports
 * nothing (index.cjs reports that there is nothing to trim).
 */
#include <node_api.h>
#include <stdlib.h> /* defines __GLIBC__ on glibc */
#if defined(__GLIBC__)
#include <malloc.h>

static napi_value Trim(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value released;
  napi_get_boolean(env, malloc_trim(0) == 1, &released);
  return released;
}
#endif

NAPI_MODULE_INIT() {
#if defined(__GLIBC__)
  napi_value fn;
  if (napi_create_function(env, "trim", NAPI_AUTO_LENGTH, Trim, NULL, &fn) != napi_ok ||
      napi_set_named_property(env, exports, "trim", fn) != napi_ok) {
    napi_throw_error(env, NULL, "@aigw/malloc-trim: could not export trim");
    return NULL;
  }
#endif
  return exports;
}
