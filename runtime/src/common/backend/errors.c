/*===- errors.c - Errors, argument checks and context options, shared ----===*/
/*
 * What every backend's context does alike: the error buffers and messages,
 * the checks every operation makes, context options and queries.
 * Compiled into each backend (backend.h).
 */

#include "internal.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Errors of calls that have no context to hold them: context creation, and
   calls given a NULL handle. */
static char context_less_error[BRAID_RT_ERROR_CAPACITY];

static char *error_buffer(braid_rt_context_t *ctx) {
  return ctx ? ctx->error : context_less_error;
}

braid_rt_status_t braid_rt_fail(braid_rt_context_t *ctx,
                                braid_rt_status_t status, const char *format,
                                ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(error_buffer(ctx), BRAID_RT_ERROR_CAPACITY, format, args);
  va_end(args);
  return status;
}

braid_rt_status_t braid_rt_fail_mpi(braid_rt_context_t *ctx, int code,
                                    const char *call, const char *where) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
    snprintf(text, sizeof(text), "unknown MPI error");
  /* Name the MPI function, not its whole argument list. */
  int name_len = (int)strcspn(call, "(");
  return braid_rt_fail(ctx, BRAID_RT_COMM_FAILURE, "%s: %.*s failed: %s", where,
                       name_len, call, text);
}

braid_rt_status_t braid_rt_mpi_state(int *out_initialized) {
  int finalized = 0;
  *out_initialized = 0;
  MPI_Initialized(out_initialized);
  MPI_Finalized(&finalized);
  if (finalized)
    return braid_rt_fail(NULL, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_context_create: MPI was already finalised "
                         "(by an earlier context?); it cannot start again");
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_mpi_start(int *argc, char ***argv) {
  int provided = 0;
  int code = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
  if (code != MPI_SUCCESS)
    return braid_rt_fail_mpi(NULL, code, "MPI_Init_thread",
                             "braid_rt_context_create");
  return BRAID_RT_OK;
}

void braid_rt_keep_context_less_error(const braid_rt_context_t *ctx) {
  snprintf(context_less_error, sizeof(context_less_error), "%s", ctx->error);
}

const char *braid_rt_context_last_error(const braid_rt_context_t *ctx) {
  return ctx ? ctx->error : context_less_error;
}

braid_rt_status_t braid_rt_check_op(braid_rt_comm_t *comm,
                                    braid_rt_stream_t *stream, const char *what,
                                    size_t count, const void *buf,
                                    const char *buf_name) {
  if (!comm)
    return braid_rt_fail(NULL, BRAID_RT_INVALID_ARGUMENT,
                         "%s: the communicator is NULL", what);
  braid_rt_status_t status = braid_rt_backend_check_comm(comm, what);
  if (status != BRAID_RT_OK)
    return status;
  if (stream && stream->ctx != comm->ctx)
    return braid_rt_fail(comm->ctx, BRAID_RT_INVALID_ARGUMENT,
                         "%s over %s: the stream belongs to another context",
                         what, comm->name);
  if (count > INT_MAX)
    return braid_rt_fail(comm->ctx, BRAID_RT_INVALID_ARGUMENT,
                         "%s over %s: count %zu exceeds INT_MAX", what,
                         comm->name, count);
  if (!buf && count > 0)
    return braid_rt_fail(comm->ctx, BRAID_RT_INVALID_ARGUMENT,
                         "%s over %s: %s is NULL but count is %zu", what,
                         comm->name, buf_name, count);
  if (buf && count > 0)
    return braid_rt_backend_check_buffer(comm, what, buf, buf_name);
  return BRAID_RT_OK;
}

braid_rt_status_t braid_rt_check_disjoint(braid_rt_comm_t *comm,
                                          const char *what, const void *a,
                                          size_t a_bytes, const void *b,
                                          size_t b_bytes) {
  uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
  if (a_bytes == 0 || b_bytes == 0 || a0 + a_bytes <= b0 || b0 + b_bytes <= a0)
    return BRAID_RT_OK;
  return braid_rt_fail(comm->ctx, BRAID_RT_INVALID_ARGUMENT,
                       "%s over %s: the send and receive buffers overlap", what,
                       comm->name);
}

braid_rt_status_t braid_rt_check_out_request(braid_rt_comm_t *comm,
                                             const char *what,
                                             braid_rt_request_t **out_request) {
  if (out_request)
    return BRAID_RT_OK;
  return braid_rt_fail(comm ? comm->ctx : NULL, BRAID_RT_INVALID_ARGUMENT,
                       "%s: out_request is NULL", what);
}

void braid_rt_context_options_init(braid_rt_context_options_t *out_opts) {
  memset(out_opts, 0, sizeof(*out_opts));
  out_opts->size = sizeof(*out_opts);
  out_opts->version = BRAID_RT_CONTEXT_OPTIONS_VERSION;
  out_opts->collective_timeout_s = 300;
  out_opts->trace = 0;
}

static braid_rt_status_t check_options(const braid_rt_context_options_t *opts) {
  if (opts->size < sizeof(braid_rt_context_options_t) ||
      opts->version != BRAID_RT_CONTEXT_OPTIONS_VERSION)
    return braid_rt_fail(NULL, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_context_create: options of size %zu, "
                         "version %u; this runtime expects size %zu, version "
                         "%d (use braid_rt_context_options_init)",
                         opts->size, (unsigned)opts->version,
                         sizeof(braid_rt_context_options_t),
                         BRAID_RT_CONTEXT_OPTIONS_VERSION);
  if (!(opts->collective_timeout_s >= 0) || isinf(opts->collective_timeout_s))
    return braid_rt_fail(NULL, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_context_create: collective timeout %g s is "
                         "not a finite number of seconds >= 0",
                         opts->collective_timeout_s);
  return BRAID_RT_OK;
}

braid_rt_status_t
braid_rt_context_prepare(const braid_rt_context_options_t *opts,
                         braid_rt_context_t **out_ctx,
                         braid_rt_context_options_t *out_opts) {
  if (!out_ctx)
    return braid_rt_fail(NULL, BRAID_RT_INVALID_ARGUMENT,
                         "braid_rt_context_create: out_ctx is NULL");
  *out_ctx = NULL;
  braid_rt_context_options_init(out_opts);
  if (!opts)
    return BRAID_RT_OK;
  braid_rt_status_t status = check_options(opts);
  if (status == BRAID_RT_OK)
    *out_opts = *opts;
  return status;
}

int braid_rt_context_rank(const braid_rt_context_t *ctx) {
  return ctx->world.rank;
}

int braid_rt_context_size(const braid_rt_context_t *ctx) {
  return ctx->world.size;
}

double braid_rt_context_timeout(const braid_rt_context_t *ctx) {
  return ctx->timeout_s;
}
