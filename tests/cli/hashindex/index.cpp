// SPDX-License-Identifier: Apache-2.0
#include "index.h"

Directory::Directory(size_t c) : capacity(c) {
  segs = static_cast<Segment **>(pm_alloc_aligned(c * sizeof(Segment *)));
  for (size_t i = 0; i < c; i++) {
    segs[i] = new Segment(0);
    segs[i]->depth = 1;
    pmkit_persist(segs[i], sizeof *segs[i]);
  }
  pmkit_persist(segs, c * sizeof *segs);
}

void Index::insert(long k) {
  Segment *s = dir.segs[k % dir.capacity];
  if (s->count == 14)
    return;
  Bucket *b = new (pm_alloc_aligned(sizeof(Bucket))) Bucket(k, 2 * k + 1);
  pmkit_persist(b, sizeof *b);
  s->items[s->count] = b;
  pmkit_persist(&s->items[s->count], sizeof b);
  s->count++;
  pmkit_persist(&s->count, sizeof s->count);
}

// A directory of `capacity` segments of depth 1, each holding `count`
// buckets of its own keys with their values.
bool Index::check() const {
  if (dir.capacity != 8 || !dir.segs)
    return false;
  for (size_t i = 0; i < dir.capacity; i++) {
    const Segment *s = dir.segs[i];
    if (!s || s->depth != 1 || s->count < 0 || s->count > 14)
      return false;
    for (long j = 0; j < s->count; j++) {
      const Bucket *b = s->items[j];
      if (!b || b->key % 8 != static_cast<long>(i) ||
          b->value != 2 * b->key + 1)
        return false;
    }
  }
  return true;
}
