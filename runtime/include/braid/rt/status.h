/*===- status.h - Status codes of the Braid runtime ----------------------===*/
/*
 * Every fallible runtime call returns a braid_rt_status_t. The library never
 * prints and never exits: a failed call also leaves a message in its context,
 * retrievable with braid_rt_context_last_error().
 */
#ifndef BRAID_RT_STATUS_H
#define BRAID_RT_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  BRAID_RT_OK = 0,
  /* The caller broke a documented precondition (null pointer, bad rank, bad
     axis, mismatched sizes). Nothing was done. */
  BRAID_RT_INVALID_ARGUMENT = 1,
  BRAID_RT_OUT_OF_MEMORY = 2,
  /* The communication library reported an error. */
  BRAID_RT_COMM_FAILURE = 3,
  /* An operation did not complete within the context's timeout; a peer is
     probably dead or stuck. The communicator is unusable afterwards. */
  BRAID_RT_TIMEOUT = 4,
  BRAID_RT_IO_ERROR = 5,
  /* Data read back is not what was written (bad header, checksum). */
  BRAID_RT_DATA_CORRUPT = 6,
  /* The call is valid but this backend does not offer it. */
  BRAID_RT_UNSUPPORTED = 7,
  /* A bug in the runtime. */
  BRAID_RT_INTERNAL = 8,
} braid_rt_status_t;

/* The enumerator's name without the prefix, e.g. "TIMEOUT"; "UNKNOWN" for a
   value outside the enum. The string is static. Thread-safe. */
const char *braid_rt_status_string(braid_rt_status_t status);

#ifdef __cplusplus
}
#endif

#endif /* BRAID_RT_STATUS_H */
