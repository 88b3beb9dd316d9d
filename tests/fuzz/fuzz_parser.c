/* libFuzzer target for the front end: any byte string through parse, sema
 * and cluster-table (hx_check_buffer). Diagnostics go to /dev/null; crashes,
 * sanitizer reports, leaks and timeouts are the findings. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ir/diag.h"
#include "passes/frontend.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *devnull;
  if (!devnull) {
    devnull = fopen("/dev/null", "w");
    if (!devnull) {
      perror("/dev/null");
      abort();
    }
    hx_diag_set_stream(devnull);
  }
  hx_check_buffer("fuzz.hx", (const char *)data, size);
  return 0;
}
