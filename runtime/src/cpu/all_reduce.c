/*===- all_reduce.c - all_reduce over MPI --------------------------------===*/

#include "internal.h"

/* The body of both forms: blocking when out_request is NULL. */
static braid_rt_status_t all_reduce_sum(braid_rt_comm_t *comm, void *buf,
                                        size_t count, braid_rt_dtype_t type,
                                        braid_rt_stream_t *stream,
                                        braid_rt_request_t **out_request) {
  braid_rt_status_t status =
      braid_rt_check_op(comm, stream, "all_reduce", count, buf, "buf");
  if (status != BRAID_RT_OK)
    return status;
  braid_rt_request_t stack, *req;
  status = braid_rt_request_begin(comm, out_request, &stack, "all_reduce",
                                  type.name, count, -1, 0, &req);
  if (status != BRAID_RT_OK)
    return status;
  int code = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, type.mpi, MPI_SUM,
                            comm->mpi, &req->mpi);
  return braid_rt_request_finish(req, out_request, code, "MPI_Iallreduce");
}

braid_rt_status_t braid_rt_all_reduce_sum_f32(braid_rt_comm_t *comm, float *buf,
                                              size_t count,
                                              braid_rt_stream_t *stream) {
  return all_reduce_sum(comm, buf, count, BRAID_RT_F32, stream, NULL);
}

braid_rt_status_t braid_rt_all_reduce_sum_f64(braid_rt_comm_t *comm,
                                              double *buf, size_t count,
                                              braid_rt_stream_t *stream) {
  return all_reduce_sum(comm, buf, count, BRAID_RT_F64, stream, NULL);
}

braid_rt_status_t
braid_rt_all_reduce_sum_f32_start(braid_rt_comm_t *comm, float *buf,
                                  size_t count, braid_rt_stream_t *stream,
                                  braid_rt_request_t **out_request) {
  braid_rt_status_t status =
      braid_rt_check_out_request(comm, "all_reduce", out_request);
  if (status != BRAID_RT_OK)
    return status;
  return all_reduce_sum(comm, buf, count, BRAID_RT_F32, stream, out_request);
}

braid_rt_status_t
braid_rt_all_reduce_sum_f64_start(braid_rt_comm_t *comm, double *buf,
                                  size_t count, braid_rt_stream_t *stream,
                                  braid_rt_request_t **out_request) {
  braid_rt_status_t status =
      braid_rt_check_out_request(comm, "all_reduce", out_request);
  if (status != BRAID_RT_OK)
    return status;
  return all_reduce_sum(comm, buf, count, BRAID_RT_F64, stream, out_request);
}
