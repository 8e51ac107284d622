/*===- op_info.h - How messages name an operation, on every backend ------===*/
/* Internal to the runtime: the words of timeout and failure messages. */
#ifndef BRAID_RT_COMMON_OP_INFO_H
#define BRAID_RT_COMMON_OP_INFO_H

#include <stddef.h>

/* What a message says about an operation. */
typedef struct {
  const char *op;    /* "all_reduce" */
  const char *dtype; /* "f32", or NULL (barrier) */
  size_t count;
  int peer; /* rank in the communicator, or -1 for collectives */
  int tag;
  const char *comm_name; /* "mesh axes {dp,tp}" */
  int comm_rank, comm_size, world_rank;
} braid_rt_op_info_t;

/* "recv of 16 f32 from rank 0 (tag 7) over world (rank 1 of 2, world rank
   1)": the operation as a timeout or failure message names it, in the same
   words on every backend. */
void braid_rt_describe_op(const braid_rt_op_info_t *info, char *out,
                          size_t capacity);

#endif /* BRAID_RT_COMMON_OP_INFO_H */
