/* msg.h: the wire messages of Lithium-C as plain C structs (the codec's side of
 * lithium.proto). Generated protobuf-c names never leave proto/; every other module speaks
 * these structs. Bulk values are payload frames, never copied into the header.
 * Any thread; a message is owned by one thread at a time. */
#ifndef LT_MSG_H
#define LT_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* LT_PROTO_VERSION names the protocol in Hello and Welcome; a server refuses another.
 * 2: the TEST op (while, if), which a server of version 1 cannot run. 3: packed
 * instructions (lt_instr_t.pack), which a server of version 2 would run as one. */
#define LT_PROTO_VERSION 3

/* An object id names a value: 64-bit client id (random per evaluation) + sequence. */
typedef struct lt_oid {
  uint64_t client;
  uint64_t seq;
} lt_oid_t;

/* A borrowed byte range: a payload frame, a parameter. */
typedef struct lt_bytes {
  const void *data;
  size_t len;
} lt_bytes_t;

typedef enum lt_msg_type {
  LT_MSG_NONE = 0,
  LT_MSG_HELLO,        /* client -> server */
  LT_MSG_WELCOME,      /* server -> client */
  LT_MSG_PROGRAM,      /* client -> server: the kernel table */
  LT_MSG_EXECUTE,      /* client -> server: a batch of instructions */
  LT_MSG_DONE,         /* server -> client: a batch of completions */
  LT_MSG_FETCH,        /* anyone -> holder: ask for a value */
  LT_MSG_VALUE,        /* holder -> asker: the value (payload frame) or an error */
  LT_MSG_RELEASE,      /* client -> server: drop values */
  LT_MSG_CANCEL,       /* client -> server: drop queued instructions */
  LT_MSG_HEARTBEAT,    /* both ways */
  LT_MSG_BYE,          /* client -> server: end of session */
  LT_MSG_ERROR,        /* server -> sender: a message was refused */
  LT_MSG_LOST,         /* client -> server: holders that died */
  LT_MSG_STATUS,       /* anyone -> server: how are you (no session needed) */
  LT_MSG_STATUS_REPLY, /* server -> asker: the answer, with the load report */
  LT_MSG_MODULE        /* client -> server: a kernel module's bytes, for the session only */
} lt_msg_type_t;

/* The last message type: the codec's range check and the tests' tables end here. */
#define LT_MSG_LAST LT_MSG_MODULE

/* A SHA-256 in hex: 64 lowercase digits (the codec refuses anything else where one is
 * required, and anything but "" or that where one is optional). */
#define LT_SHA256_HEX_LEN 64

/* The load report every server->client message carries (DESIGN.md 5). */
typedef struct lt_load {
  uint32_t active;         /* instructions running on worker threads */
  uint32_t queued;         /* fireable, waiting for a thread */
  uint32_t parked;         /* waiting for inputs */
  uint64_t completed;      /* instructions finished since start */
  float cpu;               /* recent CPU utilisation of the process, 0..ncores */
  uint64_t values_held;    /* values in the store */
  uint32_t threads;        /* worker threads */
  uint64_t peer_in;        /* bytes of values fetched from peer servers */
  uint64_t peer_out;       /* bytes of values served to peer servers */
  uint64_t incarnation;    /* random per server process; never 0 from a server */
  bool stopping;           /* the server is shutting down: place no more work there */
  uint64_t shm_in;         /* bytes of values received from peers as a memfd (server/shm.h) */
  uint64_t shm_out;        /* bytes of values sent to peers as a memfd */
  uint64_t shm_values_in;  /* values received so */
  uint64_t shm_values_out; /* values sent so */
  uint64_t shm_fallbacks;  /* same-host fetches that went by ZeroMQ after all */
  uint64_t shm_us;         /* microseconds spent making the memfds of the values sent */
} lt_load_t;

typedef enum lt_input_kind {
  LT_INPUT_INLINE = 0, /* the value is payload frame `frame` of this message */
  LT_INPUT_REF = 1     /* the value is object `id`, held by `holder` ("" = this server) */
} lt_input_kind_t;

typedef struct lt_input {
  lt_input_kind_t kind;
  uint32_t frame;     /* INLINE: payload index (0 = first frame after the header) */
  lt_oid_t id;        /* REF */
  const char *holder; /* REF: endpoint of the holder, "" for local; never NULL */
  uint64_t size;      /* REF: size when known, else 0 */
} lt_input_t;

enum {
  LT_INSTR_RETURN = 1u << 0,         /* send the outputs back with `done` */
  LT_INSTR_RELEASE_INPUTS = 1u << 1, /* drop REF inputs from the store after use */
  LT_INSTR_KEEP = 1u << 2            /* also keep returned outputs in the store */
};

/* What an instruction does with its kernels (DESIGN.md 3). */
typedef enum lt_op {
  LT_OP_SEQ = 0,    /* run `kernel`, then each of `more` on the previous output (normal form
                       fuses adjacent seq stages); exactly one output */
  LT_OP_SPLIT = 1,  /* run `kernel` (a map's split); any number of outputs */
  LT_OP_DCSTEP = 2, /* run `kernel` as a condition (lt_call_answer); when false run more[0]
                      (the divide) on the same inputs; its outputs are the parts */
  LT_OP_TEST = 3    /* run `kernel` as a condition (an if's or a while's); no outputs, the
                       inputs stay for what runs next */
} lt_op_t;

/* LT_OP_LAST is the highest op: the codec refuses others; what each op is lives in the table
 * of ops in mdf (exec.h). */
#define LT_OP_LAST LT_OP_TEST

/* Most parts a split/divide may make: output i of an instruction has the id
 * {outputs[0].client, outputs[0].seq + i}, so the client spaces instruction ids this far. */
#define LT_MAX_PARTS 65535u

/* Worker thread indices in completions are below this (a server has at most 1024 workers);
 * the codec refuses larger ones, so a trace never gets an absurd track. */
#define LT_MAX_WORKERS 65536u

typedef struct lt_stage {
  uint32_t kernel;  /* index into the session's program */
  lt_bytes_t param; /* constant parameter (decoder-owned) */
} lt_stage_t;

typedef struct lt_instr {
  uint64_t seq;     /* instruction id, named by the client */
  uint32_t op;      /* lt_op_t */
  uint32_t kernel;  /* index into the session's program (kernel table) */
  lt_bytes_t param; /* constant parameter (decoder-owned) */
  uint32_t nmore;   /* further stages: fused seq stages, or the divide of a DCSTEP */
  lt_stage_t *more;
  uint32_t ninputs;
  lt_input_t *inputs;
  uint32_t noutputs; /* ids under which outputs are stored/returned; for SPLIT and DCSTEP
                        one: the id of output 0 (output i is seq + i) */
  lt_oid_t *outputs;
  uint32_t flags; /* LT_INSTR_* */
  uint32_t group; /* grain: this and the next group - 1 instructions of the batch run on one
                     worker back to back (one hand-off); 0 or 1: alone */
  uint32_t pack;  /* packing: 0 or 1, one task; k > 1 (op SEQ, k <= LT_MAX_PACK): k tasks of
                     one chain, its members, run back to back on one worker: `outputs` holds
                     k ids (member i's output) and `inputs` k * n (member i's are
                     inputs[i * n .. i * n + n)), n = ninputs / k */
} lt_instr_t;

/* Most members a packed instruction may carry (lt_instr_t.pack); the codec refuses more. */
#define LT_MAX_PACK 1024u

typedef struct lt_output_info {
  uint64_t size;
  int32_t frame; /* payload index when returned, -1 when it stayed on the server */
} lt_output_info_t;

typedef struct lt_completion {
  uint64_t seq;
  int32_t status;     /* LT_OK or an lt_err code (LT_EKERNEL, LT_ENOKERNEL, ...) */
  const char *errmsg; /* "" when status is LT_OK; never NULL */
  uint32_t noutputs;
  lt_output_info_t *outputs;
  uint64_t service_us; /* time the kernel ran */
  int32_t answer;      /* DCSTEP: 1 base case (no outputs), 0 divided; else -1 */
  uint32_t worker;     /* the server worker thread that ran it */
  uint64_t start_us;   /* kernel start, server CLOCK_MONOTONIC us; 0 when it never ran */
  uint64_t cpu_us;     /* CPU time of the worker thread while it ran the kernel */
  uint32_t pack;       /* packing: this completion and the next pack - 1 of the batch are
                          the members of one packed instruction, in its member order, sent as
                          one entry (each: its output id's seq, at most one output, answer
                          -1, the same worker); 0 or 1: alone. The decoder sets it on member 0
                          and 0 on the others. */
} lt_completion_t;

/* A kernel module in a status reply or a welcome. */
typedef struct lt_module_info {
  const char *name;
  const char *sha256; /* hex, "" when unknown (welcome: the server has no copy) */
} lt_module_info_t;

typedef struct lt_msg {
  lt_msg_type_t type;
  union {
    struct {
      uint32_t version;
      uint64_t client_id;
      const char *name;
      uint64_t inline_max; /* outputs up to this size also come back with done (0: none) */
      uint64_t secret;     /* per evaluation, never logged (see lithium.proto Hello) */
      uint32_t nmodules;   /* the modules the program names */
      const char **modules;
    } hello;
    struct {
      uint32_t version;
      const char *server_id;
      uint32_t cores;
      uint32_t threads;
      double speed;
      uint64_t now_us;      /* the server's CLOCK_MONOTONIC us when it answered (trace clock) */
      uint64_t max_frame;   /* the largest frame the server accepts */
      uint64_t incarnation; /* as lt_load_t.incarnation */
      uint32_t ncrashed;    /* the last crash: this client's instructions it is charged to */
      uint64_t *crashed;    /* (instruction seqs), the signal and the incarnation that died */
      int32_t crash_signal; /* > 0: a crash; 256 + N: an exit with status N that the worker
                               had not decided on (a kernel called exit) */
      uint64_t crashed_incarnation;
      uint64_t crash_culprit;    /* the one whose thread got the signal, when this client's; 0 */
      double cpus;               /* the CPU it may use, in cores (cgroup quota); 0: not said */
      uint32_t nmodules;         /* one per hello module: the server's copy, sha256 "" when */
      lt_module_info_t *modules; /* it has none */
      bool accept_modules;       /* it takes shipped modules (--accept-modules) */
      const char *same_host;     /* to a peer: "HOST NAME" of its unix socket, or "" */
    } welcome;
    struct {
      uint32_t nkernels;
      const char **kernels; /* "module:function" */
      uint32_t npeers;
      const char **peers; /* the session's servers, "ENDPOINT [Z85 key]" */
    } program;
    struct {
      uint32_t ninstrs;
      lt_instr_t *instrs;
      uint32_t max_active; /* the session's thread window: at most this many of its
                              instructions run at once on the server (0: no limit) */
      uint32_t timeout_ms; /* the session's deadline per instruction (0: none) */
    } execute;
    struct {
      uint32_t ncompl;
      lt_completion_t * compl ;
      uint64_t batch; /* its number in the session from 1 (0: not numbered) */
    } done;
    struct {
      lt_oid_t id;
      bool release;       /* the asker is the last reader: drop the value once it is sent */
      uint64_t secret;    /* a peer fetching for a session: that session's hello secret */
      uint64_t max_frame; /* the asker's frame limit (0: none): a larger value is refused */
      bool shm;           /* a same-host peer: a large value may come as a memfd */
    } fetch;
    struct {
      lt_oid_t id;
      int32_t status;
      const char *errmsg;
      int32_t frame; /* payload index of the value when status is LT_OK, else -1 */
    } value;
    struct {
      uint32_t nids;
      lt_oid_t *ids;
      uint64_t secret; /* a peer releasing for a session: that session's hello secret */
    } release;
    struct {
      uint32_t nseqs;
      uint64_t *seqs;
    } cancel;
    struct {
      uint64_t seq;    /* a sequence number to answer (ping/pong); 0 when unused */
      uint64_t now_us; /* answers: the server's CLOCK_MONOTONIC us (trace clock); else 0 */
      bool draining;   /* requests: the client is moving its work off this server */
      uint64_t dones;  /* answers: the dones sent in this session so far (the last batch) */
    } heartbeat;
    struct {
      int32_t code;
      const char *message;
    } error;
    struct {
      uint32_t nholders;
      const char **holders; /* endpoints */
    } lost;
    struct {
      const char *server_id;
      const char *version;
      uint32_t protocol;
      const char *endpoint;
      uint64_t uptime_ms;
      uint32_t cores;
      double speed;
      uint32_t sessions;
      uint64_t value_bytes;
      uint32_t draining; /* sessions whose client is draining this server */
      uint32_t nmodules;
      lt_module_info_t *modules;
    } status_reply;
    struct {
      const char *name;   /* the module */
      const char *sha256; /* hex of its bytes, LT_SHA256_HEX_LEN digits */
      uint64_t size;      /* its size */
      int32_t frame;      /* payload index of its bytes, -1 when not sent */
    } module;
  } u;
  bool has_load; /* every server->client message sets it */
  lt_load_t load;
  uint32_t nframes; /* payload frames after the header */
  lt_bytes_t *frames;
  void *priv; /* decoder-owned storage; lt__msg_clear frees it */
} lt_msg_t;

#endif
