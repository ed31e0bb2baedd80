// SPDX-License-Identifier: Apache-2.0
// index.h -- a small persistent hash index in the shape of extendible
// hashing code written elsewhere: class-level operator new on the wrapper,
// member-initialiser constructors, a directory whose constructor allocates
// its segment array and a segment per slot, buckets made by placement new,
// and the program's own pmkit_persist calls (which --strip-existing removes).
#ifndef INDEX_H
#define INDEX_H
#include <new>

#include "pmalloc.h"

struct Bucket {
  long key;
  long value;
  Bucket(long k, long v) : key(k), value(v) {}
};

struct Segment {
  static void *operator new(size_t n) { return pm_alloc_aligned(n); }
  int depth;
  long count;
  Bucket *items[14];
  explicit Segment(int d) : depth(d), count(0) {}
};

struct Directory {
  size_t capacity;
  Segment **segs;
  explicit Directory(size_t c);
};

struct Index {
  static void *operator new(size_t n) { return pm_alloc_aligned(n); }
  Directory dir;
  explicit Index(size_t c) : dir(c) {}
  void insert(long k);
  bool check() const;
};
#endif
