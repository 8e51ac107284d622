/*===- fuzz_json.c - libFuzzer harness for the checkpoint header parser ---===*/
/*
 * Checkpoint headers are JSON that users hand the runtime; braid_json_parse
 * must accept what RFC 8259 allows and refuse the rest without a crash, a
 * hang or a sanitizer report. Built with -fsanitize=fuzzer,address,undefined
 * where Clang has libFuzzer (scripts/fuzz.sh runs it; ctest runs a smoke).
 */
#include "internal.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  braid_json_t *value = NULL;
  char error[256];
  if (braid_json_parse((const char *)data, size, &value, error,
                       sizeof(error)) == 0) {
    /* What the reader does with a header: look keys up. */
    (void)braid_json_get(value, "__metadata__");
    (void)braid_json_get(value, "dtype");
    braid_json_free(value);
  } else if (!memchr(error, '\0', sizeof(error))) {
    __builtin_trap(); /* an unterminated message */
  }
  return 0;
}
