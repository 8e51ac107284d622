/*===- json.c - A strict JSON parser and string writer -------------------===*/
/*
 * Just enough JSON for safetensors headers, without LLVM: the parser builds
 * a tree of braid_json_t and refuses everything RFC 8259 does not allow, so
 * that a corrupt header is reported rather than half-understood.
 */

#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*===------------------------------------------------------------------===*/
/* Buffers                                                                 */
/*===------------------------------------------------------------------===*/

void braid_rt_buffer_put(braid_rt_buffer_t *b, const void *bytes, size_t n) {
  if (b->failed)
    return;
  if (b->size + n + 1 > b->capacity) {
    size_t capacity = b->capacity ? b->capacity : 256;
    while (b->size + n + 1 > capacity)
      capacity *= 2;
    char *data = realloc(b->data, capacity);
    if (!data) {
      b->failed = 1;
      return;
    }
    b->data = data;
    b->capacity = capacity;
  }
  if (n)
    memcpy(b->data + b->size, bytes, n);
  b->size += n;
  b->data[b->size] = '\0';
}

void braid_rt_buffer_put_str(braid_rt_buffer_t *b, const char *s) {
  braid_rt_buffer_put(b, s, strlen(s));
}

void braid_rt_buffer_printf(braid_rt_buffer_t *b, const char *format, ...) {
  char small[256];
  va_list args;
  va_start(args, format);
  int n = vsnprintf(small, sizeof(small), format, args);
  va_end(args);
  if (n < 0) {
    b->failed = 1;
    return;
  }
  if ((size_t)n < sizeof(small)) {
    braid_rt_buffer_put(b, small, (size_t)n);
    return;
  }
  char *big = malloc((size_t)n + 1);
  if (!big) {
    b->failed = 1;
    return;
  }
  va_start(args, format);
  vsnprintf(big, (size_t)n + 1, format, args);
  va_end(args);
  braid_rt_buffer_put(b, big, (size_t)n);
  free(big);
}

void braid_rt_buffer_put_json_string(braid_rt_buffer_t *b, const char *s) {
  braid_rt_buffer_put(b, "\"", 1);
  for (; *s; ++s) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      char escaped[2] = {'\\', (char)c};
      braid_rt_buffer_put(b, escaped, 2);
    } else if (c < 0x20 || c == 0x7f) {
      char escaped[8];
      snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      braid_rt_buffer_put_str(b, escaped);
    } else {
      braid_rt_buffer_put(b, &c, 1);
    }
  }
  braid_rt_buffer_put(b, "\"", 1);
}

void braid_rt_buffer_free(braid_rt_buffer_t *b) {
  free(b->data);
  b->data = NULL;
  b->size = b->capacity = 0;
  b->failed = 0;
}

/*===------------------------------------------------------------------===*/
/* UTF-8                                                                   */
/*===------------------------------------------------------------------===*/

/* The length of the valid UTF-8 sequence at s (at most `avail` bytes), or 0
   if it is invalid: overlong forms, surrogates and code points above
   U+10FFFF are refused. */
static size_t utf8_sequence(const unsigned char *s, size_t avail) {
  unsigned char c = s[0];
  if (c < 0x80)
    return 1;
  size_t n;
  uint32_t cp, min;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2, cp = c & 0x1f, min = 0x80;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3, cp = c & 0x0f, min = 0x800;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4, cp = c & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (n > avail)
    return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return n;
}

int braid_rt_utf8_valid(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  size_t avail = strlen(s);
  while (avail) {
    size_t n = utf8_sequence(p, avail);
    if (!n)
      return 0;
    p += n;
    avail -= n;
  }
  return 1;
}

/*===------------------------------------------------------------------===*/
/* Parser                                                                  */
/*===------------------------------------------------------------------===*/

#define MAX_DEPTH 64

typedef struct {
  const char *text;
  size_t len, pos;
  char *error;
  size_t error_capacity;
  int failed;
} parser_t;

static int fail_at(parser_t *p, const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static int fail_at(parser_t *p, const char *format, ...) {
  if (p->failed)
    return -1;
  p->failed = 1;
  int n = snprintf(p->error, p->error_capacity, "at byte %zu: ", p->pos);
  if (n >= 0 && (size_t)n < p->error_capacity) {
    va_list args;
    va_start(args, format);
    vsnprintf(p->error + n, p->error_capacity - (size_t)n, format, args);
    va_end(args);
  }
  return -1;
}

static void skip_ws(parser_t *p) {
  while (p->pos < p->len) {
    char c = p->text[p->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
      break;
    ++p->pos;
  }
}

static int peek(parser_t *p) {
  return p->pos < p->len ? (unsigned char)p->text[p->pos] : -1;
}

/* Describes the character at the current position for a message. */
static const char *describe_here(parser_t *p, char *buf, size_t cap) {
  int c = peek(p);
  if (c < 0)
    snprintf(buf, cap, "the end of the text");
  else if (c >= 0x20 && c < 0x7f)
    snprintf(buf, cap, "'%c'", c);
  else
    snprintf(buf, cap, "byte 0x%02x", c);
  return buf;
}

static int expect(parser_t *p, char c, const char *what) {
  if (peek(p) != (unsigned char)c) {
    char here[32];
    return fail_at(p, "expected %s, found %s", what,
                   describe_here(p, here, sizeof(here)));
  }
  ++p->pos;
  return 0;
}

static int hex4(parser_t *p, uint32_t *out) {
  if (p->len - p->pos < 4)
    return fail_at(p, "\\u escape needs four hex digits");
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    char c = p->text[p->pos + (size_t)i];
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0)
      return fail_at(p, "\\u escape needs four hex digits");
    v = v * 16 + (uint32_t)d;
  }
  p->pos += 4;
  *out = v;
  return 0;
}

static void put_utf8(braid_rt_buffer_t *b, uint32_t cp) {
  unsigned char out[4];
  size_t n;
  if (cp < 0x80) {
    out[0] = (unsigned char)cp, n = 1;
  } else if (cp < 0x800) {
    out[0] = (unsigned char)(0xc0 | (cp >> 6));
    out[1] = (unsigned char)(0x80 | (cp & 0x3f)), n = 2;
  } else if (cp < 0x10000) {
    out[0] = (unsigned char)(0xe0 | (cp >> 12));
    out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    out[2] = (unsigned char)(0x80 | (cp & 0x3f)), n = 3;
  } else {
    out[0] = (unsigned char)(0xf0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (unsigned char)(0x80 | (cp & 0x3f)), n = 4;
  }
  braid_rt_buffer_put(b, out, n);
}

/* Parses a string literal; on success *out is a malloc'ed copy. */
static int parse_string(parser_t *p, char **out) {
  if (expect(p, '"', "'\"'"))
    return -1;
  braid_rt_buffer_t b = {0};
  braid_rt_buffer_put(&b, "", 0);
  for (;;) {
    if (p->pos >= p->len) {
      braid_rt_buffer_free(&b);
      return fail_at(p, "unterminated string");
    }
    unsigned char c = (unsigned char)p->text[p->pos];
    if (c == '"') {
      ++p->pos;
      break;
    }
    if (c < 0x20) {
      braid_rt_buffer_free(&b);
      return fail_at(p, "raw control character 0x%02x in a string", c);
    }
    if (c == '\\') {
      ++p->pos;
      int e = peek(p);
      char simple = 0;
      switch (e) {
      case '"': simple = '"'; break;
      case '\\': simple = '\\'; break;
      case '/': simple = '/'; break;
      case 'b': simple = '\b'; break;
      case 'f': simple = '\f'; break;
      case 'n': simple = '\n'; break;
      case 'r': simple = '\r'; break;
      case 't': simple = '\t'; break;
      case 'u': break;
      default:
        braid_rt_buffer_free(&b);
        return fail_at(p, "invalid escape in a string");
      }
      ++p->pos;
      if (simple) {
        braid_rt_buffer_put(&b, &simple, 1);
        continue;
      }
      uint32_t cp;
      if (hex4(p, &cp)) {
        braid_rt_buffer_free(&b);
        return -1;
      }
      if (cp >= 0xd800 && cp <= 0xdbff) {
        uint32_t low;
        if (p->len - p->pos < 2 || p->text[p->pos] != '\\' ||
            p->text[p->pos + 1] != 'u') {
          braid_rt_buffer_free(&b);
          return fail_at(p, "lone surrogate in a \\u escape");
        }
        p->pos += 2;
        if (hex4(p, &low)) {
          braid_rt_buffer_free(&b);
          return -1;
        }
        if (low < 0xdc00 || low > 0xdfff) {
          braid_rt_buffer_free(&b);
          return fail_at(p, "lone surrogate in a \\u escape");
        }
        cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
      } else if (cp >= 0xdc00 && cp <= 0xdfff) {
        braid_rt_buffer_free(&b);
        return fail_at(p, "lone surrogate in a \\u escape");
      } else if (cp == 0) {
        braid_rt_buffer_free(&b);
        return fail_at(p, "a string holds U+0000");
      }
      put_utf8(&b, cp);
      continue;
    }
    size_t n = utf8_sequence((const unsigned char *)p->text + p->pos,
                             p->len - p->pos);
    if (!n) {
      braid_rt_buffer_free(&b);
      return fail_at(p, "invalid UTF-8 in a string");
    }
    braid_rt_buffer_put(&b, p->text + p->pos, n);
    p->pos += n;
  }
  if (b.failed) {
    braid_rt_buffer_free(&b);
    return fail_at(p, "out of memory");
  }
  *out = b.data;
  return 0;
}

static int is_digit(int c) { return c >= '0' && c <= '9'; }

static int parse_number(parser_t *p, braid_json_t *v) {
  size_t start = p->pos;
  int integral = 1;
  if (peek(p) == '-') {
    integral = 0;
    ++p->pos;
  }
  if (peek(p) == '0') {
    ++p->pos;
    if (is_digit(peek(p)))
      return fail_at(p, "leading zero in a number");
  } else if (is_digit(peek(p))) {
    while (is_digit(peek(p)))
      ++p->pos;
  } else {
    return fail_at(p, "invalid number");
  }
  size_t int_end = p->pos;
  if (peek(p) == '.') {
    integral = 0;
    ++p->pos;
    if (!is_digit(peek(p)))
      return fail_at(p, "a fraction needs digits");
    while (is_digit(peek(p)))
      ++p->pos;
  }
  if (peek(p) == 'e' || peek(p) == 'E') {
    integral = 0;
    ++p->pos;
    if (peek(p) == '+' || peek(p) == '-')
      ++p->pos;
    if (!is_digit(peek(p)))
      return fail_at(p, "an exponent needs digits");
    while (is_digit(peek(p)))
      ++p->pos;
  }
  v->kind = BRAID_JSON_NUMBER;
  if (integral) {
    uint64_t value = 0;
    int fits = 1;
    for (size_t i = start; i < int_end; ++i) {
      uint64_t d = (uint64_t)(p->text[i] - '0');
      if (value > (UINT64_MAX - d) / 10)
        fits = 0;
      value = value * 10 + d;
    }
    v->is_uint = fits;
    v->uint_value = fits ? value : 0;
  }
  return 0;
}

static int parse_literal(parser_t *p, const char *word) {
  size_t n = strlen(word);
  if (p->len - p->pos < n || memcmp(p->text + p->pos, word, n) != 0)
    return fail_at(p, "invalid literal");
  p->pos += n;
  return 0;
}

static int parse_value(parser_t *p, braid_json_t *v, int depth);

/* Appends a zeroed item to v's items (and a key slot for objects). */
static braid_json_t *append_item(parser_t *p, braid_json_t *v,
                                 size_t *capacity) {
  if (v->count == *capacity) {
    size_t cap = *capacity ? 2 * *capacity : 4;
    braid_json_t *items = realloc(v->items, cap * sizeof(*items));
    if (!items) {
      fail_at(p, "out of memory");
      return NULL;
    }
    v->items = items;
    if (v->kind == BRAID_JSON_OBJECT) {
      char **keys = realloc(v->keys, cap * sizeof(*keys));
      if (!keys) {
        fail_at(p, "out of memory");
        return NULL;
      }
      v->keys = keys;
    }
    *capacity = cap;
  }
  braid_json_t *item = &v->items[v->count];
  memset(item, 0, sizeof(*item));
  if (v->kind == BRAID_JSON_OBJECT)
    v->keys[v->count] = NULL;
  ++v->count;
  return item;
}

static int compare_keys(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Refuses an object with two equal keys. */
static int check_unique_keys(parser_t *p, const braid_json_t *v) {
  if (v->count < 2)
    return 0;
  char **sorted = malloc(v->count * sizeof(*sorted));
  if (!sorted)
    return fail_at(p, "out of memory");
  memcpy(sorted, v->keys, v->count * sizeof(*sorted));
  qsort(sorted, v->count, sizeof(*sorted), compare_keys);
  for (size_t i = 1; i < v->count; ++i)
    if (strcmp(sorted[i - 1], sorted[i]) == 0) {
      int r = fail_at(p, "duplicate key \"%.200s\" in an object", sorted[i]);
      free(sorted);
      return r;
    }
  free(sorted);
  return 0;
}

static int parse_container(parser_t *p, braid_json_t *v, int depth,
                           int object) {
  if (depth >= MAX_DEPTH)
    return fail_at(p, "nesting deeper than %d", MAX_DEPTH);
  ++p->pos; /* '{' or '[' */
  v->kind = object ? BRAID_JSON_OBJECT : BRAID_JSON_ARRAY;
  size_t capacity = 0;
  char close = object ? '}' : ']';
  skip_ws(p);
  if (peek(p) == close) {
    ++p->pos;
    return 0;
  }
  for (;;) {
    skip_ws(p);
    char *key = NULL;
    if (object) {
      if (peek(p) != '"') {
        char here[32];
        return fail_at(p, "expected a string key, found %s",
                       describe_here(p, here, sizeof(here)));
      }
      if (parse_string(p, &key))
        return -1;
      skip_ws(p);
      if (expect(p, ':', "':'")) {
        free(key);
        return -1;
      }
    }
    braid_json_t *item = append_item(p, v, &capacity);
    if (!item) {
      free(key);
      return -1;
    }
    if (object)
      v->keys[v->count - 1] = key;
    if (parse_value(p, item, depth + 1))
      return -1;
    skip_ws(p);
    if (peek(p) == ',') {
      ++p->pos;
      continue;
    }
    if (peek(p) == close) {
      ++p->pos;
      return object ? check_unique_keys(p, v) : 0;
    }
    char here[32];
    return fail_at(p, "expected ',' or '%c', found %s", close,
                   describe_here(p, here, sizeof(here)));
  }
}

static int parse_value(parser_t *p, braid_json_t *v, int depth) {
  skip_ws(p);
  int c = peek(p);
  switch (c) {
  case '{':
    return parse_container(p, v, depth, 1);
  case '[':
    return parse_container(p, v, depth, 0);
  case '"':
    v->kind = BRAID_JSON_STRING;
    return parse_string(p, &v->string);
  case 't':
    v->kind = BRAID_JSON_BOOL;
    v->boolean = 1;
    return parse_literal(p, "true");
  case 'f':
    v->kind = BRAID_JSON_BOOL;
    return parse_literal(p, "false");
  case 'n':
    v->kind = BRAID_JSON_NULL;
    return parse_literal(p, "null");
  default:
    if (c == '-' || is_digit(c))
      return parse_number(p, v);
    char here[32];
    return fail_at(p, "expected a value, found %s",
                   describe_here(p, here, sizeof(here)));
  }
}

static void free_contents(braid_json_t *v) {
  free(v->string);
  for (size_t i = 0; i < v->count; ++i) {
    free_contents(&v->items[i]);
    if (v->keys)
      free(v->keys[i]);
  }
  free(v->items);
  free(v->keys);
}

void braid_json_free(braid_json_t *value) {
  if (!value)
    return;
  free_contents(value);
  free(value);
}

int braid_json_parse(const char *text, size_t len, braid_json_t **out,
                     char *error, size_t error_capacity) {
  parser_t p = {text, len, 0, error, error_capacity, 0};
  *out = NULL;
  braid_json_t *v = calloc(1, sizeof(*v));
  if (!v) {
    snprintf(error, error_capacity, "out of memory");
    return -1;
  }
  if (parse_value(&p, v, 0) == 0) {
    skip_ws(&p);
    if (p.pos != p.len) {
      char here[32];
      fail_at(&p, "unexpected %s after the value",
              describe_here(&p, here, sizeof(here)));
    }
  }
  if (p.failed) {
    braid_json_free(v);
    return -1;
  }
  *out = v;
  return 0;
}

const braid_json_t *braid_json_get(const braid_json_t *obj, const char *key) {
  if (obj->kind != BRAID_JSON_OBJECT)
    return NULL;
  for (size_t i = 0; i < obj->count; ++i)
    if (strcmp(obj->keys[i], key) == 0)
      return &obj->items[i];
  return NULL;
}
