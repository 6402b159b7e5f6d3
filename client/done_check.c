/* done_check.c: a server's completions checked against what the client sent it (issue 36).
 * A packed completion that cannot be the report of a pack sent there is a protocol error of
 * that server: a member named twice, a member id the client never made for an instruction,
 * or, for members still out there in their pack, another count or order than the pack had.
 * A member out there in a pack is reported only in that pack, in its place, never alone.
 * A completion of an instruction that is not out there (in a pack) is no error but a stray
 * (jobs.c): an honest server reports one late after the client took it back, and a pack
 * taken back is reported late the same way, so members no longer out there in that pack
 * are not held against it. It reads the dispatcher's state and changes nothing; the
 * loop drops the server (lt__server_misbehaved). Dispatcher thread only. */
#include <stdio.h>
#include <stdlib.h>

#include "sched_jobs.h"
#include "sched_servers.h"

/* Instruction ids are spaced this far (instr.c): a member's output id is its record's seq. */
#define ID_STEP ((uint64_t)LT_MAX_PARTS + 1)

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* members_distinct checks that the k members c[0..k) name k different ids the client made
 * for instructions (aligned, already handed out). */
static int members_distinct(const lt_sched_t *s, const lt_completion_t *c, uint32_t k, char *why,
                            size_t len) {
  uint64_t seqs[LT_MAX_PACK];
  for (uint32_t i = 0; i < k; i++) {
    uint64_t q = c[i].seq;
    if (q % ID_STEP != 0 || q < ID_STEP || q >= s->next_seq) {
      snprintf(why, len, "member %u of a packed completion names %llu, no instruction of ours", i,
               (unsigned long long)q);
      return 0;
    }
    seqs[i] = q;
  }
  qsort(seqs, k, sizeof seqs[0], cmp_u64);
  for (uint32_t i = 1; i < k; i++) {
    if (seqs[i] == seqs[i - 1]) {
      snprintf(why, len, "a packed completion names instruction %llu twice",
               (unsigned long long)seqs[i]);
      return 0;
    }
  }
  return 1;
}

/* out_packed returns the record of `seq` when it is out on server idx in a pack, else NULL. */
static const lt_instr_rec_t *out_packed(const lt_sched_t *s, size_t idx, uint64_t seq) {
  lt_instr_rec_t *r;
  HASH_FIND(hh, s->inflight, &seq, sizeof seq, r);
  return r != NULL && r->conn == (int)idx && r->packed ? r : NULL;
}

/* members_in_place checks the members of c[0..k) that are out on server idx in a pack: each
 * was sent in the pack named c[0].seq, of k members, in the place it is reported in. */
static int members_in_place(const lt_sched_t *s, size_t idx, const lt_completion_t *c, uint32_t k,
                            char *why, size_t len) {
  for (uint32_t i = 0; i < k; i++) {
    const lt_instr_rec_t *r = out_packed(s, idx, c[i].seq);
    if (r == NULL) continue; /* not out there in a pack: late, or reported already */
    if (r->pack_lead == c[0].seq && r->pack_n != k) {
      snprintf(why, len, "pack %llu reported with %u members, sent with %u",
               (unsigned long long)c[0].seq, k, r->pack_n);
      return 0;
    }
    if (r->pack_lead != c[0].seq || r->pack_i != i) {
      snprintf(why, len, "member %u of pack %llu reported as member %u of pack %llu", r->pack_i,
               (unsigned long long)r->pack_lead, i, (unsigned long long)c[0].seq);
      return 0;
    }
  }
  return 1;
}

int lt__done_check(const lt_sched_t *s, size_t idx, const lt_msg_t *m, char *why, size_t len) {
  const lt_completion_t *c = m->u.done.compl ;
  uint32_t n = m->u.done.ncompl;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t k = c[i].pack;
    if (k <= 1) {
      /* A member of a pack out there is reported with its pack, never alone. */
      const lt_instr_rec_t *r = out_packed(s, idx, c[i].seq);
      if (r == NULL) continue;
      snprintf(why, len, "a single completion for member %u of %u of pack %llu", r->pack_i,
               r->pack_n, (unsigned long long)r->pack_lead);
      return 0;
    }
    /* The decoder makes a pack's k members consecutive; k is at most LT_MAX_PACK. */
    if (k > LT_MAX_PACK || k > n - i) {
      snprintf(why, len, "a packed completion of %u members, %u sent", k, n - i);
      return 0;
    }
    if (!members_distinct(s, &c[i], k, why, len) || !members_in_place(s, idx, &c[i], k, why, len))
      return 0;
    i += k - 1;
  }
  return 1;
}
