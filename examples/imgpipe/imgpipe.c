/* examples/imgpipe/imgpipe.c: the image-filter demo, the experiment of the Lithium paper. Runs
 * pipe(farm(seq(filters:blur, "5")), farm(seq(filters:oil, "5"))) (or the --filters chosen)
 * over the images of a directory or over synthetic ones, writes every result as a PNG into
 * --out, prints the time, throughput and the bytes moved, and with --verify checks every
 * output byte against the sequential evaluator. Run `imgpipe --help` for the options. Main
 * thread, plus the feeder thread of each pass (run.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lithium.h>

#include "imgtoken.h"
#include "inputs.h"
#include "run.h"
#include "runner.h"

#define PROG        "imgpipe"
#define MAX_FILTERS 16
#define MAX_SETS    64
#define MAX_GEN     1000000

typedef struct options {
  ex_opts_t common;
  const char *in_dir; /* --in, or NULL */
  long long generate; /* --generate N, 0 when not given */
  uint32_t gen_w, gen_h;
  char **files; /* positional image files (the array is owned, the strings are argv's) */
  int nfiles;
  const char *out_dir;
  const char *filters[MAX_FILTERS];
  int nfilters;
  long long radius;
  const char *mode;           /* --mode, or NULL */
  char *kv[2 * MAX_SETS + 3]; /* the options for lt_eval_set: key, value, ..., NULL (owned) */
  int nkv;
  int verify;
} options_t;

static void usage(FILE *f, const char *argv0) {
  fprintf(f,
          "usage: %s [--in DIR | --generate N [--size WxH] | FILE...] --out DIR\n"
          "       [--filters blur,oil] [--radius R] [--mode plain|optimized] [--set KEY=VALUE]...\n"
          "       [--verify] [--servers N | --hosts EP,... | --sequential] [--stats]\n"
          "  --in DIR        filter every image file of DIR (PNG, JPEG, PPM, BMP, GIF, TGA, ...)\n"
          "  --generate N    filter N synthetic images instead (deterministic)\n"
          "  --size WxH      size of the synthetic images (default 640x480)\n"
          "  --out DIR       write each result as DIR/<base name>.png (DIR is created)\n"
          "  --filters LIST  the filter stages in order, blur and oil (default blur,oil)\n"
          "  --radius R      window radius of every filter, 0..%d (default 5: 11x11)\n"
          "  --mode M        plain (original Lithium) or optimized (the default)\n"
          "  --set KEY=VALUE an evaluator option (lt_eval_set), e.g. trace=FILE, throttle=on,\n"
          "                  lookahead=off, lazy=off, max_threads=4; repeatable\n"
          "  --verify        run again with the sequential evaluator and compare every byte\n"
          "  --sequential    the sequential evaluator only, no servers (same as --local)\n",
          argv0, IMG_MAX_RADIUS);
  ex_opts_usage(f);
}

/* add_kv appends an evaluator option, copying key and value. */
static int add_kv(options_t *opt, const char *key, size_t keylen, const char *value) {
  if (opt->nkv >= 2 * MAX_SETS) {
    fprintf(stderr, "%s: more than %d evaluator options\n", PROG, MAX_SETS);
    return -1;
  }
  char *k = strndup(key, keylen), *v = strdup(value);
  if (k == NULL || v == NULL) {
    free(k);
    free(v);
    fprintf(stderr, "%s: out of memory\n", PROG);
    return -1;
  }
  opt->kv[opt->nkv++] = k;
  opt->kv[opt->nkv++] = v;
  opt->kv[opt->nkv] = NULL;
  return 0;
}

/* free_options frees what parse_args allocated. */
static void free_options(options_t *opt) {
  for (int i = 0; i < opt->nkv; i++)
    free(opt->kv[i]);
  opt->nkv = 0;
  free(opt->files);
  opt->files = NULL;
}

/* parse_filters splits the comma-separated filter list into opt->filters (pointing into
 * `list`, which it modifies). */
static int parse_filters(options_t *opt, char *list) {
  opt->nfilters = 0;
  char *save = NULL;
  for (char *f = strtok_r(list, ",", &save); f != NULL; f = strtok_r(NULL, ",", &save)) {
    if (strcmp(f, "blur") != 0 && strcmp(f, "oil") != 0) {
      fprintf(stderr, "%s: --filters: unknown filter '%s' (blur or oil)\n", PROG, f);
      return -1;
    }
    if (opt->nfilters == MAX_FILTERS) {
      fprintf(stderr, "%s: --filters: more than %d stages\n", PROG, MAX_FILTERS);
      return -1;
    }
    opt->filters[opt->nfilters++] = f;
  }
  if (opt->nfilters == 0) {
    fprintf(stderr, "%s: --filters lists no filter\n", PROG);
    return -1;
  }
  return 0;
}

/* parse_size reads "WxH" for --size. */
static int parse_size(options_t *opt, const char *text) {
  unsigned w = 0, h = 0;
  char extra, why[160];
  if (sscanf(text, "%ux%u%c", &w, &h, &extra) != 2) {
    fprintf(stderr, "%s: --size needs WxH, e.g. 640x480, not '%s'\n", PROG, text);
    return -1;
  }
  if (img_size_check(w, h, why, sizeof why) != 0) {
    fprintf(stderr, "%s: --size: %s\n", PROG, why);
    return -1;
  }
  opt->gen_w = w;
  opt->gen_h = h;
  return 0;
}

/* parse_one takes argv[*i] (and its value) when it is an imgpipe option: 1 taken, 0 not an
 * option of ours, -1 bad. */
static int parse_one(options_t *opt, int argc, char **argv, int *i) {
  const char *a = argv[*i];
  int has_value = *i + 1 < argc;
  if (strcmp(a, "--verify") == 0) {
    opt->verify = 1;
  } else if (strcmp(a, "--sequential") == 0) {
    opt->common.local = 1;
  } else if (!has_value) {
    return 0;
  } else if (strcmp(a, "--in") == 0) {
    opt->in_dir = argv[++*i];
  } else if (strcmp(a, "--out") == 0) {
    opt->out_dir = argv[++*i];
  } else if (strcmp(a, "--generate") == 0) {
    if (ex_parse_num(&opt->common, a, argv[++*i], 1, MAX_GEN, &opt->generate) != 0) return -1;
  } else if (strcmp(a, "--size") == 0) {
    if (parse_size(opt, argv[++*i]) != 0) return -1;
  } else if (strcmp(a, "--radius") == 0) {
    if (ex_parse_num(&opt->common, a, argv[++*i], 0, IMG_MAX_RADIUS, &opt->radius) != 0) return -1;
  } else if (strcmp(a, "--filters") == 0) {
    if (parse_filters(opt, argv[++*i]) != 0) return -1;
  } else if (strcmp(a, "--mode") == 0) {
    opt->mode = argv[++*i];
    if (strcmp(opt->mode, "plain") != 0 && strcmp(opt->mode, "optimized") != 0) {
      fprintf(stderr, "%s: --mode is plain or optimized, not '%s'\n", PROG, opt->mode);
      return -1;
    }
  } else if (strcmp(a, "--set") == 0) {
    const char *kv = argv[++*i], *eq = strchr(kv, '=');
    if (eq == NULL || eq == kv) {
      fprintf(stderr, "%s: --set needs KEY=VALUE, not '%s'\n", PROG, kv);
      return -1;
    }
    if (add_kv(opt, kv, (size_t)(eq - kv), eq + 1) != 0) return -1;
  } else {
    return 0;
  }
  return 1;
}

static int parse_args(int argc, char **argv, options_t *opt) {
  static char default_filters[] = "blur,oil";
  ex_opts_init(&opt->common, PROG);
  opt->gen_w = 640;
  opt->gen_h = 480;
  opt->radius = 5;
  opt->kv[0] = NULL;
  parse_filters(opt, default_filters);
  opt->files = calloc((size_t)argc, sizeof *opt->files);
  if (opt->files == NULL) {
    fprintf(stderr, "%s: out of memory\n", PROG);
    return -1;
  }
  int nfiles = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout, argv[0]);
      free_options(opt);
      exit(0);
    }
    int rc = ex_opts_parse(&opt->common, argc, argv, &i);
    if (rc == 0) rc = parse_one(opt, argc, argv, &i);
    if (rc < 0) return -1;
    if (rc > 0) continue;
    if (a[0] == '-' && a[1] != '\0') {
      fprintf(stderr, "%s: bad argument '%s'\n", PROG, a);
      usage(stderr, argv[0]);
      return -1;
    }
    opt->files[nfiles++] = argv[i];
  }
  opt->nfiles = nfiles;
  const char *why = NULL;
  if (opt->out_dir == NULL)
    why = "--out DIR is required";
  else if (opt->generate > 0 && (opt->in_dir != NULL || nfiles > 0))
    why = "--generate cannot be combined with --in or image files";
  else if (opt->generate == 0 && opt->in_dir == NULL && nfiles == 0)
    why = "give --in DIR, --generate N or image files";
  else if (opt->verify && opt->common.local)
    why = "--verify compares servers against the sequential evaluator: drop --sequential";
  if (why != NULL) {
    fprintf(stderr, "%s: %s (%s --help lists the options)\n", PROG, why, argv[0]);
    return -1;
  }
  return 0;
}

/* make_program builds the program. Synthetic images (the paper's experiment: the client sends
 * pixels) go through a pipeline of farms, one per filter, each with the radius as its kernel's
 * parameter: pipe(farm(seq(filters:blur, "5")), farm(seq(filters:oil, "5"))). Files go as
 * their bytes through the whole image job, decoding and encoding included:
 * pipe(farm(seq(imgcodec:decode)), farm(seq(filters:blur, "5")), ..., farm(seq(imgcodec:encode))).
 * The stage count is the user's and lt_pipeline takes a NULL-terminated argument list, so the
 * program is written as an expression; lt_skel_parse gives the tree lt_pipeline(lt_farm(
 * lt_seq_with("filters:blur", "5", 1)), ...) would. */
static lt_skel_t *make_program(const options_t *opt) {
  char text[(MAX_FILTERS + 2) * 48 + 16];
  const int files = opt->generate == 0, stages = opt->nfilters + 2 * files;
  size_t n = 0;
  if (stages > 1) n += (size_t)snprintf(text + n, sizeof text - n, "pipe(");
  if (files) n += (size_t)snprintf(text + n, sizeof text - n, "farm(seq(imgcodec:decode)), ");
  for (int i = 0; i < opt->nfilters; i++)
    n += (size_t)snprintf(text + n, sizeof text - n, "%sfarm(seq(filters:%s, \"%lld\"))",
                          i > 0 ? ", " : "", opt->filters[i], opt->radius);
  if (files) n += (size_t)snprintf(text + n, sizeof text - n, ", farm(seq(imgcodec:encode))");
  if (stages > 1) snprintf(text + n, sizeof text - n, ")");
  lt_skel_t *s = NULL;
  char err[256];
  if (lt_skel_parse(text, &s, err, sizeof err) != LT_OK) {
    fprintf(stderr, "%s: %s: %s\n", PROG, text, err);
    return NULL;
  }
  return s;
}

/* check_options tries the evaluator options on a scratch evaluator, so that a bad one stops
 * the program before it spawns servers or touches an image. */
static int check_options(const options_t *opt, const char *const *kv) {
  lt_eval_t *ev = NULL;
  int rc = lt_eval_new(&ev, make_program(opt));
  if (rc != LT_OK) {
    fprintf(stderr, "%s: lt_eval_new: %s\n", PROG, lt_strerror(rc));
    return -1;
  }
  for (size_t i = 0; kv[i] != NULL && rc == LT_OK; i += 2)
    if ((rc = lt_eval_set(ev, kv[i], kv[i + 1])) != LT_OK)
      fprintf(stderr, "%s: option %s=%s: %s\n", PROG, kv[i], kv[i + 1], lt_strerror(rc));
  lt_eval_free(ev);
  return rc == LT_OK ? 0 : -1;
}

/* human writes a byte count with a binary-prefix unit. */
static void human(char *buf, size_t len, long long bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)(bytes < 0 ? 0 : bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  snprintf(buf, len, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
}

/* summary prints the line of a pass on stdout: images, time, rate, where and bytes moved. */
static void summary(const options_t *opt, lt_eval_t *ev, const img_run_result_t *res) {
  char where[64];
  ex_eval_where(&opt->common, opt->common.local, where, sizeof where);
  printf("%s: %zu image%s", PROG, res->ok, res->ok == 1 ? "" : "s");
  if (res->failed > 0) printf(" (%zu failed)", res->failed);
  printf(" in %.3f s, %.2f images/s, on %s", res->seconds,
         res->seconds > 0 ? (double)res->ok / res->seconds : 0.0, where);
  char *json = NULL;
  int rc = lt_eval_stats_json(ev, &json);
  if (rc != LT_OK) {
    printf("\n");
    fprintf(stderr, "%s: lt_eval_stats_json: %s\n", PROG, lt_strerror(rc));
    return;
  }
  if (!opt->common.local) {
    char to[32], from[32], peer[32];
    human(to, sizeof to, ex_stat_u64(json, "bytes_to_servers"));
    human(from, sizeof from, ex_stat_u64(json, "bytes_from_servers"));
    human(peer, sizeof peer, ex_stat_sum(json, "bytes_peer_in"));
    printf("; client->servers %s, servers->client %s, server<->server %s", to, from, peer);
  }
  printf("\n");
  if (opt->common.stats) printf("%s\n", json);
  fflush(stdout);
  free(json);
}

/* verify_kv is the option list for the verify pass: the user's minus trace, whose file belongs
 * to the parallel run. */
static void verify_kv(const options_t *opt, const char **kv) {
  int n = 0;
  for (int i = 0; i < opt->nkv; i += 2)
    if (strcmp(opt->kv[i], "trace") != 0) {
      kv[n++] = opt->kv[i];
      kv[n++] = opt->kv[i + 1];
    }
  kv[n] = NULL;
}

/* verify runs the sequential evaluator over the images the first pass wrote and compares
 * their files with its results. Returns 0 when every image is identical. */
static int verify(const options_t *opt, const img_inputs_t *l, unsigned char *status) {
  const char *kv[2 * MAX_SETS + 3];
  verify_kv(opt, kv);
  lt_eval_t *ev = ex_eval_open_with(&opt->common, make_program(opt), 1, kv);
  if (ev == NULL) return -1;
  img_run_result_t res;
  int rc = img_run(ev, l, IMG_RUN_VERIFY, status, &res);
  lt_eval_free(ev);
  if (rc != 0) return -1;
  if (res.differed == 0 && res.failed == 0) {
    printf("%s: verify: all %zu images written are byte-identical to the sequential evaluator "
           "(lt_eval_run_local, %.3f s)\n",
           PROG, res.ok, res.seconds);
    return 0;
  }
  printf("%s: verify: MISMATCH: %zu of %zu images differ from the sequential evaluator, %zu "
         "could not be checked\n",
         PROG, res.differed, res.images, res.failed);
  return -1;
}

/* describe prints what the run is about to do. */
static void describe(const options_t *opt, const img_inputs_t *l, lt_skel_t *program) {
  char *text = lt_skel_format(program);
  printf("%s: %s\n", PROG, text != NULL ? text : "?");
  free(text);
  if (opt->generate > 0)
    printf("%s: %zu synthetic %ux%u images -> %s/\n", PROG, l->n, opt->gen_w, opt->gen_h,
           opt->out_dir);
  else
    printf("%s: %zu image files -> %s/\n", PROG, l->n, opt->out_dir);
  fflush(stdout);
}

/* build_inputs makes the image list and the output paths. */
static int build_inputs(const options_t *opt, img_inputs_t *l) {
  char err[1024];
  img_inputs_init(l, opt->gen_w, opt->gen_h);
  if (opt->generate > 0 && img_inputs_add_synth(l, (size_t)opt->generate) != 0) {
    fprintf(stderr, "%s: out of memory\n", PROG);
    return -1;
  }
  if (opt->in_dir != NULL && img_inputs_add_dir(l, opt->in_dir, err, sizeof err) != 0) {
    fprintf(stderr, "%s: --in %s\n", PROG, err);
    return -1;
  }
  for (int i = 0; i < opt->nfiles; i++)
    if (img_inputs_add_file(l, opt->files[i]) != 0) {
      fprintf(stderr, "%s: out of memory\n", PROG);
      return -1;
    }
  if (l->n == 0) {
    fprintf(stderr, "%s: --in %s: no files in the directory\n", PROG, opt->in_dir);
    return -1;
  }
  if (img_inputs_plan(l, opt->out_dir, err, sizeof err) != 0) {
    fprintf(stderr, "%s: --out %s: %s\n", PROG, opt->out_dir, err);
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  options_t opt = {0};
  if (parse_args(argc, argv, &opt) != 0) {
    free_options(&opt);
    return 2;
  }
  /* --mode goes first, so that the switches given with --set override it. */
  const char *kv[2 * MAX_SETS + 5];
  int n = 0;
  if (opt.mode != NULL) {
    kv[n++] = "mode";
    kv[n++] = opt.mode;
  }
  for (int i = 0; i < opt.nkv; i++)
    kv[n++] = opt.kv[i];
  kv[n] = NULL;
  img_inputs_t l;
  img_inputs_init(&l, 0, 0);
  if (check_options(&opt, kv) != 0 || build_inputs(&opt, &l) != 0) {
    img_inputs_free(&l);
    free_options(&opt);
    return 2;
  }

  int status = 1;
  unsigned char *st = calloc(l.n, 1);
  lt_skel_t *program = make_program(&opt);
  lt_eval_t *ev = NULL;
  if (st == NULL || program == NULL) {
    if (st == NULL) fprintf(stderr, "%s: out of memory\n", PROG);
    lt_skel_free(program);
    goto out;
  }
  describe(&opt, &l, program);
  ev = ex_eval_open_with(&opt.common, program, opt.common.local, kv);
  if (ev == NULL) goto out;
  img_run_result_t res;
  int rc = img_run(ev, &l, IMG_RUN_WRITE, st, &res);
  summary(&opt, ev, &res);
  lt_eval_free(ev);
  if (rc != 0) goto out;
  status = res.failed > 0 ? 1 : 0;
  if (opt.verify && res.ok > 0 && verify(&opt, &l, st) != 0) status = 1;
  if (res.failed > 0)
    fprintf(stderr, "%s: %zu of %zu images failed (see the messages above)\n", PROG, res.failed,
            res.images);
out:
  free(st);
  img_inputs_free(&l);
  free_options(&opt);
  return status;
}
