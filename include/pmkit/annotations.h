/* SPDX-License-Identifier: Apache-2.0 */
/*
 * annotations.h -- the annotations a user writes in C or C++ source. Under
 * clang they become `annotate` attributes that the pmkit-annotations pass
 * turns into function attributes for the mode passes; under any other
 * compiler, or without the plugin, they compile away, so one source builds
 * every variant (DESIGN.md "Annotations a user writes").
 */
#ifndef PMKIT_ANNOTATIONS_H
#define PMKIT_ANNOTATIONS_H

#if defined(__clang__)
#define PMKIT_ANNOTATE_(s) __attribute__((annotate(s)))
#else
#define PMKIT_ANNOTATE_(s)
#endif

/* A failure-atomic section: the whole function (clobber, ssapp modes). */
#define PMKIT_FASE PMKIT_ANNOTATE_("pmkit.fase") __attribute__((noinline))
/* A FASE parameter that points to volatile memory the FASE reads: parameter
 * p (1-based, as in alloc_size) points to the number of bytes held by
 * parameter n. The bytes are logged at entry, so recovery re-executes the
 * FASE with a copy. PMKIT_FASE_SCRATCH: the FASE writes the buffer before it
 * reads it; only the length is logged and recovery passes zeroed memory.
 * Pointers into a pool need nothing: they are logged as pool offsets. */
#define PMKIT_FASE_IN(p, n) PMKIT_ANNOTATE_("pmkit.fase_in:" #p ":" #n)
#define PMKIT_FASE_SCRATCH(p, n)                                               \
  PMKIT_ANNOTATE_("pmkit.fase_scratch:" #p ":" #n)
/* A function that returns pointers to persistent memory (robust mode). */
#define PMKIT_PM_ALLOCATOR PMKIT_ANNOTATE_("pmkit.pm_allocator")
/* A function the robust analysis must leave alone. */
#define PMKIT_ROBUST_IGNORE PMKIT_ANNOTATE_("pmkit.robust_ignore")

/* Statements the robust mode must leave alone (no flush or fence after
 * them): a pattern the user knows is safe without strict persistency (a
 * checksum, an atomic that never changes). The markers are asm comments,
 * so without the plugin they only keep the compiler from moving memory
 * accesses across them. */
#if defined(__GNUC__)
#define PMKIT_ROBUST_IGNORE_BEGIN                                              \
  __asm__ __volatile__("# pmkit.robust_ignore_begin" ::: "memory")
#define PMKIT_ROBUST_IGNORE_END                                                \
  __asm__ __volatile__("# pmkit.robust_ignore_end" ::: "memory")
#else
#define PMKIT_ROBUST_IGNORE_BEGIN
#define PMKIT_ROBUST_IGNORE_END
#endif

#endif /* PMKIT_ANNOTATIONS_H */
