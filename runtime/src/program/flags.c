/*===- flags.c - Command-line values of generated programs ---------------===*/

#include "internal.h"

#include <stdio.h>

int braid_rt_program_parse_flag(const char *flag, const char *text,
                                uint64_t min, uint64_t max, uint64_t *out) {
  uint64_t value = 0;
  const char *p = text;
  int ok = *p != 0;
  for (; ok && *p; ++p) {
    unsigned digit = (unsigned)(*p - '0');
    if (digit > 9 || value > (UINT64_MAX - digit) / 10)
      ok = 0;
    else
      value = value * 10 + digit;
  }
  if (ok && value >= min && value <= max) {
    *out = value;
    return 1;
  }
  if (max == UINT64_MAX || max == (uint64_t)INT64_MAX)
    fprintf(stderr, "error: %s needs an integer >= %llu, got '%s'\n", flag,
            (unsigned long long)min, text);
  else
    fprintf(stderr, "error: %s needs an integer from %llu to %llu, got '%s'\n",
            flag, (unsigned long long)min, (unsigned long long)max, text);
  return 0;
}
