/*===- status.c - Names of the runtime's status codes --------------------===*/

#include "braid/rt/status.h"

const char *braid_rt_status_string(braid_rt_status_t status) {
  switch (status) {
  case BRAID_RT_OK:
    return "OK";
  case BRAID_RT_INVALID_ARGUMENT:
    return "INVALID_ARGUMENT";
  case BRAID_RT_OUT_OF_MEMORY:
    return "OUT_OF_MEMORY";
  case BRAID_RT_COMM_FAILURE:
    return "COMM_FAILURE";
  case BRAID_RT_TIMEOUT:
    return "TIMEOUT";
  case BRAID_RT_IO_ERROR:
    return "IO_ERROR";
  case BRAID_RT_DATA_CORRUPT:
    return "DATA_CORRUPT";
  case BRAID_RT_UNSUPPORTED:
    return "UNSUPPORTED";
  case BRAID_RT_INTERNAL:
    return "INTERNAL";
  }
  return "UNKNOWN";
}
