/*===- op_info.c - How messages name an operation, on every backend ------===*/

#include "op_info.h"

#include <stdio.h>

void braid_rt_describe_op(const braid_rt_op_info_t *info, char *out,
                          size_t capacity) {
  size_t used = (size_t)snprintf(out, capacity, "%s", info->op);
  if (info->dtype && used < capacity)
    used += (size_t)snprintf(out + used, capacity - used, " of %zu %s",
                             info->count, info->dtype);
  if (info->peer >= 0 && used < capacity)
    used += (size_t)snprintf(
        out + used, capacity - used, " %s rank %d (tag %d)",
        info->op[0] == 's' ? "to" : "from", info->peer, info->tag);
  if (used < capacity)
    snprintf(out + used, capacity - used,
             " over %s (rank %d of %d, world rank %d)", info->comm_name,
             info->comm_rank, info->comm_size, info->world_rank);
}
