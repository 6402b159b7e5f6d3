/* codec.h: frames <-> lt_msg_t. Knows nothing of sockets: input is an array of byte ranges
 * (header first, then payloads), output a header buffer to send before the payloads.
 * Every size, count and index is checked against lt_codec_limits_t before anything is
 * allocated for it. Any thread (no shared state). */
#ifndef LT_CODEC_H
#define LT_CODEC_H

#include "msg.h"

typedef struct lt_codec_limits {
  size_t max_header;   /* bytes of the header frame */
  uint32_t max_frames; /* payload frames per message */
  size_t max_frame;    /* bytes of one payload frame */
  uint32_t max_items;  /* instructions/completions/ids/kernels per message, inputs/outputs
                          per instruction */
  size_t max_string;   /* bytes of one string (names, error text, endpoints) */
} lt_codec_limits_t;

/* lt__codec_limits_default fills `lim` with the defaults: header 4 MiB, 4096 frames,
 * frame 1 GiB, 65536 items, string 4096. */
void lt__codec_limits_default(lt_codec_limits_t *lim);

/* lt__msg_decode parses `frames[0]` as the header and `frames[1..nframes-1]` as payloads
 * into *msg. On success msg->frames points at frames+1 (borrowed: keep `frames` alive until
 * lt__msg_clear) and strings/arrays live in msg->priv. Errors: LT_EPROTO (garbage, unknown
 * body, bad index, bad UTF-8, missing fields), LT_ETOOBIG (a limit exceeded), LT_ENOMEM.
 * On error *msg needs no clear. */
int lt__msg_decode(lt_msg_t *msg, const lt_bytes_t *frames, size_t nframes,
                   const lt_codec_limits_t *lim);

/* lt__msg_encode packs the header of `msg` into a malloc'd buffer *hdr of *hdrlen bytes
 * (caller frees). The payloads to send after it are msg->frames[0..nframes-1]; the codec
 * checks that every frame index in the message is below msg->nframes. LT_EINVAL for an
 * inconsistent message, LT_ENOMEM. */
int lt__msg_encode(const lt_msg_t *msg, void **hdr, size_t *hdrlen);

/* lt__msg_clear frees what lt__msg_decode allocated and zeroes *msg; accepts a zeroed msg. */
void lt__msg_clear(lt_msg_t *msg);

/* lt__msg_type_name returns a static name for `t` ("execute", ...). */
const char *lt__msg_type_name(lt_msg_type_t t);

#endif
