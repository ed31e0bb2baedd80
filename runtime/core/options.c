/* SPDX-License-Identifier: Apache-2.0 */
/*
 * options.c -- reads the environment variables of options.def once, on
 * first use: each is checked against its kind and values, and a bad one
 * gets a warning naming what is allowed and its fallback, or, for the
 * testing knobs, stops the program (exit 2).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "options.h"

enum { KIND_NUM, KIND_TEXT, KIND_CHOICE };
struct opt {
  const char *name, *dflt, *values, *onbad;
  int kind;
};
static const struct opt table[PMK_NOPTS] = {
#define PMK_OPTION(id, kind, dflt, values, onbad, help)                        \
  {"PMKIT_" #id, dflt, values, onbad, KIND_##kind},
#include "options.def"
#undef PMK_OPTION
};

static const char *text[PMK_NOPTS];
static uint64_t num[PMK_NOPTS];
static int choice[PMK_NOPTS];
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* The index of v among the |-separated values, or -1. */
static int index_of(const char *values, const char *v) {
  size_t n = strlen(v);
  int i = 0;
  for (const char *s = values; *s; i++) {
    const char *e = strchr(s, '|');
    size_t len = e ? (size_t)(e - s) : strlen(s);
    if (len == n && !strncmp(s, v, n))
      return i;
    if (!e)
      break;
    s = e + 1;
  }
  return -1;
}

/* 1 if v is a value of option o, filling its number or choice. */
static int take(unsigned o, const char *v) {
  const struct opt *t = &table[o];
  text[o] = v;
  num[o] = 0;
  choice[o] = -1;
  if (!*v)
    return 1;
  if (t->kind == KIND_NUM) { /* decimal digits, or 0x and hex digits */
    int hex = v[0] == '0' && (v[1] == 'x' || v[1] == 'X');
    const char *d = hex ? v + 2 : v;
    if (!*d ||
        strspn(d, hex ? "0123456789abcdefABCDEF" : "0123456789") != strlen(d))
      return 0;
    errno = 0;
    num[o] = strtoull(d, NULL, hex ? 16 : 10);
    return errno != ERANGE; /* above 2^64 - 1 */
  }
  if (t->kind == KIND_CHOICE)
    return (choice[o] = index_of(t->values, v)) >= 0;
  return 1;
}

static void parse(void) {
  for (unsigned o = 0; o < PMK_NOPTS; o++) {
    const struct opt *t = &table[o];
    const char *v = getenv(t->name);
    if (!v || !*v) {
      take(o, t->dflt);
      continue;
    }
    if (take(o, v))
      continue;
    char want[256] = "a number (decimal, or hex after 0x, below 2^64)";
    if (t->kind == KIND_CHOICE) {
      size_t n = 0;
      for (const char *c = t->values; *c && n + 3 < sizeof want; c++)
        if (*c == '|')
          want[n++] = ',', want[n++] = ' ';
        else
          want[n++] = *c;
      want[n] = 0;
    }
    if (!t->onbad) {
      fprintf(stderr, "pmkit: %s=%s: not %s%s\n", t->name, v,
              t->kind == KIND_CHOICE ? "one of " : "", want);
      _exit(2);
    }
    fprintf(stderr, "pmkit: %s=%s: not %s%s; using %s\n", t->name, v,
            t->kind == KIND_CHOICE ? "one of " : "", want,
            *t->onbad ? t->onbad : "the default");
    take(o, t->onbad);
  }
}

const char *pmk_opt_text(enum pmk_opt o) {
  pthread_once(&once, parse);
  return text[o];
}

uint64_t pmk_opt_num(enum pmk_opt o) {
  pthread_once(&once, parse);
  return num[o];
}

int pmk_opt_is(enum pmk_opt o, const char *v) {
  pthread_once(&once, parse);
  int i = table[o].kind == KIND_CHOICE ? index_of(table[o].values, v) : -1;
  if (i < 0) {
    fprintf(stderr, "pmkit: internal error: %s has no value '%s'\n",
            table[o].name, v);
    abort();
  }
  return choice[o] == i;
}
