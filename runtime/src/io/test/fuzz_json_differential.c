/*===- fuzz_json_differential.c - The header parser against jansson -------===*/
/*
 * Is the runtime's own JSON parser as sound as a well-kept library? Every
 * input goes to both braid_json_parse and jansson 2.14 (strict mode:
 * duplicate keys refused, any top-level value, no NUL in strings), which
 * must agree on accepting it and, when both accept, on the value: kinds,
 * strings, keys, array order and non-negative integers. The differences
 * by design are skipped, each named below; any other disagreement traps.
 */
#include "internal.h"

#include <jansson.h>
#include <stdint.h>
#include <string.h>

/* Whether `ours` and `theirs` are the same JSON value. */
static int same(const braid_json_t *ours, const json_t *theirs) {
  switch (ours->kind) {
  case BRAID_JSON_NULL:
    return json_is_null(theirs);
  case BRAID_JSON_BOOL:
    return ours->boolean ? json_is_true(theirs) : json_is_false(theirs);
  case BRAID_JSON_NUMBER:
    if (!json_is_number(theirs))
      return 0;
    /* jansson keeps integers as long long; ours marks those that fit in
       uint64_t. A non-negative integer literal is one in both. */
    if (ours->is_uint)
      return json_is_integer(theirs) &&
             (uint64_t)json_integer_value(theirs) == ours->uint_value;
    return 1;
  case BRAID_JSON_STRING:
    return json_is_string(theirs) &&
           json_string_length(theirs) == strlen(ours->string) &&
           strcmp(json_string_value(theirs), ours->string) == 0;
  case BRAID_JSON_ARRAY:
    if (!json_is_array(theirs) || json_array_size(theirs) != ours->count)
      return 0;
    for (size_t i = 0; i < ours->count; ++i)
      if (!same(&ours->items[i], json_array_get(theirs, i)))
        return 0;
    return 1;
  case BRAID_JSON_OBJECT:
    if (!json_is_object(theirs) || json_object_size(theirs) != ours->count)
      return 0;
    for (size_t i = 0; i < ours->count; ++i) {
      const json_t *item = json_object_get(theirs, ours->keys[i]);
      if (!item || !same(&ours->items[i], item))
        return 0;
    }
    return 1;
  }
  return 0;
}

/* Differences by design, where jansson refuses what RFC 8259 allows and
   ours accepts: integers beyond long long and reals beyond double (the
   RFC leaves the range to implementations; safetensors offsets are
   uint64). */
static int is_design_difference(const json_error_t *theirs) {
  return strstr(theirs->text, "too big") || strstr(theirs->text, "overflow");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  braid_json_t *ours = NULL;
  char error[256];
  int ours_ok = braid_json_parse((const char *)data, size, &ours, error,
                                 sizeof(error)) == 0;
  json_error_t theirs_error;
  json_t *theirs =
      json_loadb((const char *)data, size,
                 JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &theirs_error);
  if (ours_ok && !theirs) {
    if (!is_design_difference(&theirs_error))
      __builtin_trap(); /* ours accepts what jansson refuses */
  } else if (!ours_ok && theirs) {
    /* Ours refuses nesting deeper than 64 (jansson: 2048), and a NUL byte
       outside a string, which jansson takes for the end of the input. */
    if (!strstr(error, "nesting deeper") && !strstr(error, "0x00"))
      __builtin_trap(); /* ours refuses what jansson accepts */
  } else if (ours_ok && theirs && !same(ours, theirs)) {
    __builtin_trap(); /* both accept, with different values */
  }
  braid_json_free(ours);
  json_decref(theirs);
  return 0;
}
