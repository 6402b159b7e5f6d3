/* proto/wire.c: the codec's helpers below protobuf-c: a bump arena that holds a decoded
 * message (protobuf-c objects and lt_msg_t arrays alike), a UTF-8 validator (protobuf-c
 * does not check strings) and a pre-scan of the wire format that enforces max_items before
 * protobuf-c allocates arrays. No sockets, no global state: any thread. */
#include "wire.h"

#include <lithium/error.h>

#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "lithium.pb-c.h"

/* ---------------------------------------------------------------------------------------
 * Arena: a few malloc'd chunks freed together. The first region sits in the same malloc
 * as the arena header, so a small message costs one malloc and one free. */

#define ARENA_ALIGN 8u
_Static_assert(alignof(uint64_t) <= ARENA_ALIGN && alignof(double) <= ARENA_ALIGN &&
                   alignof(void *) <= ARENA_ALIGN && alignof(size_t) <= ARENA_ALIGN,
               "arena alignment too small");

/* Allocations at least this large get a chunk of their own, so a large array does not
 * waste the rest of the current chunk. Under AddressSanitizer every allocation does, so
 * that ASan sees the bounds of each object. */
#if defined(__SANITIZE_ADDRESS__)
#define ARENA_OWN_CHUNK 1u /* every allocation: sizes are rounded up to ARENA_ALIGN */
#else
#define ARENA_OWN_CHUNK (16u * 1024u)
#endif
#define ARENA_MIN_FIRST 1024u
#define ARENA_MAX_FIRST (256u * 1024u)

typedef struct chunk {
  struct chunk *next;
  alignas(ARENA_ALIGN) unsigned char data[];
} chunk;

struct lt__arena {
  unsigned char *ptr; /* bump pointer into the current region */
  unsigned char *end;
  chunk *chunks; /* chunks after the first region, newest first */
  size_t grow;   /* size of the next region */
  bool oom;      /* an allocation failed (tells LT_ENOMEM from LT_EPROTO) */
};
typedef struct lt__arena arena;

#define ARENA_HDR ((sizeof(arena) + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1))

void *lt__arena_alloc(arena *a, size_t n) {
  if (n > SIZE_MAX / 2) {
    a->oom = true;
    return NULL;
  }
  n = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
  if (n == 0) n = ARENA_ALIGN;
  if ((size_t)(a->end - a->ptr) >= n) {
    void *p = a->ptr;
    a->ptr += n;
    return p;
  }
  if (n >= ARENA_OWN_CHUNK) {
    chunk *c = malloc(sizeof(chunk) + n);
    if (c == NULL) {
      a->oom = true;
      return NULL;
    }
    c->next = a->chunks;
    a->chunks = c;
    return c->data;
  }
  size_t cap = a->grow > n ? a->grow : n;
  chunk *c = malloc(sizeof(chunk) + cap);
  if (c == NULL) {
    a->oom = true;
    return NULL;
  }
  c->next = a->chunks;
  a->chunks = c;
  a->ptr = c->data + n;
  a->end = c->data + cap;
  if (a->grow < SIZE_MAX / 4) a->grow *= 2;
  return c->data;
}

arena *lt__arena_new(size_t hint) {
  size_t first = hint < ARENA_MIN_FIRST ? ARENA_MIN_FIRST : hint;
  if (first > ARENA_MAX_FIRST) first = ARENA_MAX_FIRST;
#if defined(__SANITIZE_ADDRESS__)
  first = 0;
#endif
  arena *a = malloc(ARENA_HDR + first);
  if (a == NULL) return NULL;
  a->ptr = (unsigned char *)a + ARENA_HDR;
  a->end = a->ptr + first;
  a->chunks = NULL;
  a->grow = first < ARENA_MIN_FIRST ? ARENA_MIN_FIRST * 4 : first * 2;
  a->oom = false;
  return a;
}

void lt__arena_free(arena *a) {
  if (a == NULL) return;
  chunk *c = a->chunks;
  while (c != NULL) {
    chunk *next = c->next;
    free(c);
    c = next;
  }
  free(a);
}

bool lt__arena_oom(const arena *a) {
  return a->oom;
}

/* ---------------------------------------------------------------------------------------
 * Pre-scan: walks the wire format of the envelope and of the bodies that hold repeated
 * fields, counting elements, before protobuf-c allocates arrays for them. It also rejects
 * malformed framing early. Leaf messages are left to protobuf-c. */

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

typedef struct wire {
  const uint8_t *p;
  const uint8_t *end;
} wire;

typedef struct field {
  uint32_t fno;
  unsigned wt;
  const uint8_t *sub; /* WT_LEN: contents */
  size_t sublen;
} field;

static int read_varint(wire *w, uint64_t *v) {
  if (w->p < w->end && *w->p < 0x80) { /* the common one-byte case */
    *v = *w->p++;
    return 0;
  }
  uint64_t x = 0;
  for (unsigned shift = 0; shift < 70; shift += 7) {
    if (w->p == w->end) return LT_EPROTO;
    uint8_t b = *w->p++;
    x |= (uint64_t)(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      *v = x;
      return 0;
    }
  }
  return LT_EPROTO;
}

/* next_field reads one field: 1 when read, 0 at the end, LT_EPROTO when malformed. */
static int next_field(wire *w, field *f) {
  if (w->p == w->end) return 0;
  uint64_t tag, len;
  if (read_varint(w, &tag) != 0 || tag > UINT32_MAX || (tag >> 3) == 0) return LT_EPROTO;
  f->fno = (uint32_t)(tag >> 3);
  f->wt = (unsigned)(tag & 7);
  size_t left;
  switch (f->wt) {
  case WT_VARINT:
    return read_varint(w, &len) == 0 ? 1 : LT_EPROTO;
  case WT_I64:
  case WT_I32:
    len = f->wt == WT_I64 ? 8 : 4;
    if ((size_t)(w->end - w->p) < len) return LT_EPROTO;
    w->p += len;
    return 1;
  case WT_LEN:
    if (read_varint(w, &len) != 0) return LT_EPROTO;
    left = (size_t)(w->end - w->p);
    if (len > left) return LT_EPROTO;
    f->sub = w->p;
    f->sublen = (size_t)len;
    w->p += len;
    return 1;
  default:
    return LT_EPROTO; /* groups are not part of proto3 */
  }
}

/* What to count in one message kind: up to SCAN_REP repeated fields (fno 0 = unused), each
 * checked against max_items. A field's elements are messages or strings (one per
 * occurrence; the elements of rep[0] may be messages to scan with `child`), or scalars,
 * which proto3 packs: a packed run holds as many as it has varints, or its length / 8 for
 * fixed64 (either may also come one per occurrence). */
#define SCAN_REP 9
typedef enum { REP_MSG = 0, REP_VARINT, REP_FIXED64 } rep_kind;
typedef struct scan_rep {
  uint32_t fno;
  rep_kind kind;
} scan_rep;
typedef struct scan_spec {
  scan_rep rep[SCAN_REP];
  const struct scan_spec *child;
} scan_spec;

/* Instr: inputs, outputs, more, pack_frames, pack_outputs. */
static const scan_spec instr_spec = {
    {{4, REP_MSG}, {5, REP_MSG}, {8, REP_MSG}, {11, REP_VARINT}, {12, REP_FIXED64}}, NULL};
static const scan_spec execute_spec = {{{1, REP_MSG}}, &instr_spec};
/* Completion: outputs, pack_seq, pack_status, pack_errmsg, pack_size, pack_frame,
 * pack_service_us, pack_start_us, pack_cpu_us. */
static const scan_spec compl_spec = {{{4, REP_MSG},
                                      {10, REP_FIXED64},
                                      {11, REP_VARINT},
                                      {12, REP_MSG},
                                      {13, REP_VARINT},
                                      {14, REP_VARINT},
                                      {15, REP_VARINT},
                                      {16, REP_VARINT},
                                      {17, REP_VARINT}},
                                     NULL};
static const scan_spec done_spec = {{{1, REP_MSG}}, &compl_spec};
static const scan_spec list_spec = {{{1, REP_MSG}}, NULL};      /* kernels, ids */
static const scan_spec cancel_spec = {{{1, REP_VARINT}}, NULL}; /* seqs */

static size_t count_varints(const uint8_t *p, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    k += (p[i] & 0x80) == 0;
  return k;
}

/* rep_count returns how many elements field occurrence `f` of kind `kind` holds; LT_EPROTO
 * (negative) for a packed fixed64 run of a length that is no multiple of 8. */
static int64_t rep_count(const field *f, rep_kind kind) {
  if (kind == REP_MSG || f->wt != WT_LEN) return 1;
  if (kind == REP_VARINT) return (int64_t)count_varints(f->sub, f->sublen);
  return f->sublen % 8 == 0 ? (int64_t)(f->sublen / 8) : LT_EPROTO;
}

/* scan_msg counts the repeated fields of one message into n[0..SCAN_REP), which may
 * already hold the counts of an earlier occurrence of the same body (see
 * lt__wire_prescan). */
static int scan_msg(const uint8_t *p, size_t len, const scan_spec *s, uint32_t max,
                    uint64_t n[SCAN_REP]) {
  wire w = {p, p + len};
  field f = {0};
  int r;
  while ((r = next_field(&w, &f)) == 1) {
    for (int k = 0; k < SCAN_REP; k++) {
      if (s->rep[k].fno == 0 || f.fno != s->rep[k].fno) continue;
      int64_t c = rep_count(&f, s->rep[k].kind);
      if (c < 0) return (int)c;
      n[k] += (uint64_t)c;
      if (n[k] > max) return LT_ETOOBIG;
      if (k == 0 && s->child != NULL && f.wt == WT_LEN) {
        uint64_t inner[SCAN_REP] = {0};
        int rc = scan_msg(f.sub, f.sublen, s->child, max, inner);
        if (rc != 0) return rc;
      }
    }
  }
  return r;
}

int lt__wire_prescan(const uint8_t *p, size_t len, uint32_t max) {
  /* Counts per body field number (2..13). A body given twice is summed: never less than
   * what protobuf-c keeps, whether it merges the two or keeps the last. */
  uint64_t counts[14][SCAN_REP];
  memset(counts, 0, sizeof counts);
  wire w = {p, p + len};
  field f = {0};
  int r;
  while ((r = next_field(&w, &f)) == 1) {
    if (f.wt != WT_LEN || f.fno >= 14) continue;
    const scan_spec *s = NULL;
    switch (f.fno) {
    case LITHIUM__ENVELOPE__BODY_PROGRAM:
    case LITHIUM__ENVELOPE__BODY_RELEASE:
      s = &list_spec;
      break;
    case LITHIUM__ENVELOPE__BODY_EXECUTE:
      s = &execute_spec;
      break;
    case LITHIUM__ENVELOPE__BODY_DONE:
      s = &done_spec;
      break;
    case LITHIUM__ENVELOPE__BODY_CANCEL:
      s = &cancel_spec;
      break;
    default:
      break;
    }
    if (s != NULL) {
      int rc = scan_msg(f.sub, f.sublen, s, max, counts[f.fno]);
      if (rc != 0) return rc;
    }
  }
  return r;
}
