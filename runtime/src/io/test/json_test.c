/*===- json_test.c - The strict JSON parser of checkpoint headers --------===*/
/*
 * Valid documents parse to the expected values; every kind of invalid
 * document is refused with a message naming the byte and the problem. Not
 * an MPI program.
 */

#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define EXPECT(cond, ...)                                                      \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, "\n");                                                   \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

static braid_json_t *parse_ok(const char *text) {
  braid_json_t *v = NULL;
  char error[256];
  int rc = braid_json_parse(text, strlen(text), &v, error, sizeof(error));
  EXPECT(rc == 0 && v, "'%s' refused: %s", text, error);
  return v;
}

static void parse_bad(const char *text, size_t len, const char *fragment) {
  braid_json_t *v = (braid_json_t *)&v;
  char error[256] = "";
  int rc = braid_json_parse(text, len, &v, error, sizeof(error));
  EXPECT(rc == -1 && v == NULL, "'%.*s' accepted", (int)len, text);
  EXPECT(strstr(error, fragment) != NULL, "'%.*s': message '%s' lacks '%s'",
         (int)len, text, error, fragment);
  EXPECT(strncmp(error, "at byte ", 8) == 0, "message '%s' names no byte",
         error);
}

static void check_valid(void) {
  braid_json_t *v = parse_ok(
      " {\"a\": [1, 0, 18446744073709551615, 18446744073709551616, -1, 2.5, "
      "1e3], \"b\": {\"c\": \"x\\\"y\\\\z\\/\\n\\u00e9\\ud83d\\ude00\"}, "
      "\"t\": true, \"f\": false, \"n\": null, \"e\": {}, \"ea\": []}   \n");
  if (!v)
    return;
  EXPECT(v->kind == BRAID_JSON_OBJECT && v->count == 7, "root");
  const braid_json_t *a = braid_json_get(v, "a");
  EXPECT(a && a->kind == BRAID_JSON_ARRAY && a->count == 7, "a");
  if (a && a->count == 7) {
    EXPECT(a->items[0].is_uint && a->items[0].uint_value == 1, "1");
    EXPECT(a->items[1].is_uint && a->items[1].uint_value == 0, "0");
    EXPECT(a->items[2].is_uint && a->items[2].uint_value == UINT64_MAX, "max");
    EXPECT(a->items[3].kind == BRAID_JSON_NUMBER && !a->items[3].is_uint,
           "2^64 is a number but not a uint64");
    for (int i = 4; i < 7; ++i)
      EXPECT(a->items[i].kind == BRAID_JSON_NUMBER && !a->items[i].is_uint,
             "item %d is not a non-negative integer", i);
  }
  const braid_json_t *b = braid_json_get(v, "b");
  const braid_json_t *c = b ? braid_json_get(b, "c") : NULL;
  EXPECT(c && c->kind == BRAID_JSON_STRING &&
             strcmp(c->string, "x\"y\\z/\n\xc3\xa9\xf0\x9f\x98\x80") == 0,
         "escapes decode to UTF-8: '%s'", c ? c->string : "(none)");
  EXPECT(braid_json_get(v, "t")->boolean == 1, "true");
  EXPECT(braid_json_get(v, "f")->kind == BRAID_JSON_BOOL, "false");
  EXPECT(braid_json_get(v, "n")->kind == BRAID_JSON_NULL, "null");
  EXPECT(braid_json_get(v, "missing") == NULL, "missing key");
  braid_json_free(v);

  /* Raw UTF-8 passes through. */
  v = parse_ok("\"h\xc3\xa9llo \xe2\x82\xac\"");
  EXPECT(v && strcmp(v->string, "h\xc3\xa9llo \xe2\x82\xac") == 0, "utf-8");
  braid_json_free(v);

  /* 64 levels are fine; the 65th is not (below). */
  char deep[200];
  memset(deep, '[', 64);
  memset(deep + 64, ']', 64);
  deep[128] = '\0';
  braid_json_free(parse_ok(deep));
}

static void check_invalid(void) {
  static const struct {
    const char *text, *fragment;
  } cases[] = {
      {"", "expected a value, found the end"},
      {"   ", "expected a value"},
      {"{", "expected a string key, found the end"},
      {"{\"a\":1,}", "expected a string key, found '}'"},
      {"[1,]", "expected a value, found ']'"},
      {"[1 2]", "expected ',' or ']'"},
      {"{\"a\" 1}", "expected ':'"},
      {"{a:1}", "expected a string key"},
      {"{\"a\":1} x", "unexpected 'x' after the value"},
      {"{\"a\":1}{}", "after the value"},
      {"01", "leading zero"},
      {"-", "invalid number"},
      {"1.", "a fraction needs digits"},
      {"1e", "an exponent needs digits"},
      {"+1", "expected a value"},
      {"tru", "invalid literal"},
      {"nul", "invalid literal"},
      {"\"abc", "unterminated string"},
      {"\"a\tb\"", "raw control character 0x09"},
      {"\"\\x\"", "invalid escape"},
      {"\"\\u12\"", "four hex digits"},
      {"\"\\ud800\"", "lone surrogate"},
      {"\"\\udc00\"", "lone surrogate"},
      {"\"\\ud800\\u0041\"", "lone surrogate"},
      {"\"\\u0000\"", "U+0000"},
      {"\"\xc3\"", "invalid UTF-8"},
      {"\"\xc0\xaf\"", "invalid UTF-8"},         /* overlong '/' */
      {"\"\xed\xa0\x80\"", "invalid UTF-8"},     /* encoded surrogate */
      {"\"\xf4\x90\x80\x80\"", "invalid UTF-8"}, /* above U+10FFFF */
      {"\"\xff\"", "invalid UTF-8"},
      {"{\"a\":1,\"b\":2,\"a\":3}", "duplicate key \"a\""},
      {"/* c */ 1", "expected a value"},
      {"NaN", "expected a value"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i)
    parse_bad(cases[i].text, strlen(cases[i].text), cases[i].fragment);
  /* A NUL byte inside the text is not whitespace. */
  parse_bad("{} \0", 4, "unexpected byte 0x00");
  parse_bad("\"a\0b\"", 5, "raw control character 0x00");
  char deep[200];
  memset(deep, '[', 65);
  memset(deep + 65, ']', 65);
  parse_bad(deep, 130, "nesting deeper than 64");
  /* The error position is the offending byte. */
  char error[256];
  braid_json_t *v;
  braid_json_parse("[1, x]", 6, &v, error, sizeof(error));
  EXPECT(strncmp(error, "at byte 4: ", 11) == 0, "position: '%s'", error);
  /* Every prefix of a valid document is invalid. */
  const char *doc = "{\"k\":[1,{\"x\":\"y\"}],\"z\":null}";
  for (size_t n = 0; n < strlen(doc); ++n) {
    v = NULL;
    EXPECT(braid_json_parse(doc, n, &v, error, sizeof(error)) == -1,
           "prefix of %zu bytes accepted", n);
    braid_json_free(v);
  }
}

static void check_writer(void) {
  braid_rt_buffer_t b = {0};
  braid_rt_buffer_put_json_string(&b, "a\"b\\c\n\x01\x7f\xc3\xa9");
  EXPECT(!b.failed && strcmp(b.data, "\"a\\\"b\\\\c\\u000a\\u0001\\u007f"
                                     "\xc3\xa9\"") == 0,
         "escaped: %s", b.data);
  /* What the writer writes, the parser reads back. */
  braid_json_t *v = parse_ok(b.data);
  EXPECT(v && strcmp(v->string, "a\"b\\c\n\x01\x7f\xc3\xa9") == 0,
         "round trip");
  braid_json_free(v);
  braid_rt_buffer_free(&b);
  EXPECT(braid_rt_utf8_valid("ok \xe2\x82\xac"), "valid utf-8");
  EXPECT(!braid_rt_utf8_valid("bad \xe2\x82"), "truncated utf-8");
}

int main(void) {
  check_valid();
  check_invalid();
  check_writer();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("json_test: all checks passed\n");
  return 0;
}
