/*===- mpi_single.h - The MPI calls of braid_rt_cuda for one process -----===*/
/*
 * braid_rt_cuda_single is braid_rt_cuda built against this header instead of
 * <mpi.h>: the same sources for a world of one rank, so that a one-GPU
 * program neither needs libmpi nor a launcher (NCCL's unique id needs no
 * broadcast when there is nobody to send it to). Only what the backend
 * calls is here, with MPI's meaning on one process: collectives copy,
 * barriers return, MPI_Abort exits. Datatypes are their sizes in bytes.
 */
#ifndef BRAID_RT_CUDA_COMM_MPI_SINGLE_H
#define BRAID_RT_CUDA_COMM_MPI_SINGLE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Op;
typedef int MPI_Info;
typedef int MPI_Errhandler;

#define MPI_SUCCESS 0
#define MPI_COMM_NULL 0
#define MPI_COMM_WORLD 1
#define MPI_INFO_NULL 0
#define MPI_ERRORS_RETURN 0
#define MPI_COMM_TYPE_SHARED 0
#define MPI_THREAD_SERIALIZED 2
#define MPI_MAX_ERROR_STRING 64
#define MPI_MIN 0
#define MPI_BYTE ((MPI_Datatype)1)
#define MPI_CHAR ((MPI_Datatype)1)
#define MPI_INT ((MPI_Datatype)sizeof(int))

/* Whether MPI_Init_thread and MPI_Finalize ran, as MPI keeps them: 0 never,
   1 initialised, 2 finalised. Defined in context.c. */
extern int braid_mpi_single_state;

static inline int MPI_Initialized(int *flag) {
  *flag = braid_mpi_single_state >= 1;
  return MPI_SUCCESS;
}
static inline int MPI_Finalized(int *flag) {
  *flag = braid_mpi_single_state == 2;
  return MPI_SUCCESS;
}
static inline int MPI_Init_thread(int *argc, char ***argv, int required,
                                  int *provided) {
  (void)argc;
  (void)argv;
  *provided = required;
  braid_mpi_single_state = 1;
  return MPI_SUCCESS;
}
static inline int MPI_Finalize(void) {
  braid_mpi_single_state = 2;
  return MPI_SUCCESS;
}
static inline int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *out) {
  (void)comm;
  *out = MPI_COMM_WORLD;
  return MPI_SUCCESS;
}
static inline int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler h) {
  (void)comm;
  (void)h;
  return MPI_SUCCESS;
}
static inline int MPI_Comm_rank(MPI_Comm comm, int *rank) {
  (void)comm;
  *rank = 0;
  return MPI_SUCCESS;
}
static inline int MPI_Comm_size(MPI_Comm comm, int *size) {
  (void)comm;
  *size = 1;
  return MPI_SUCCESS;
}
static inline int MPI_Comm_split_type(MPI_Comm comm, int type, int key,
                                      MPI_Info info, MPI_Comm *out) {
  (void)comm;
  (void)type;
  (void)key;
  (void)info;
  *out = MPI_COMM_WORLD;
  return MPI_SUCCESS;
}
static inline int MPI_Comm_free(MPI_Comm *comm) {
  *comm = MPI_COMM_NULL;
  return MPI_SUCCESS;
}
static inline int MPI_Barrier(MPI_Comm comm) {
  (void)comm;
  return MPI_SUCCESS;
}
static inline int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root,
                            MPI_Comm comm) {
  (void)buf;
  (void)count;
  (void)type;
  (void)root;
  (void)comm;
  return MPI_SUCCESS;
}
static inline int MPI_Allreduce(const void *send, void *recv, int count,
                                MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  (void)op;
  (void)comm;
  memmove(recv, send, (size_t)count * (size_t)type);
  return MPI_SUCCESS;
}
static inline int MPI_Gather(const void *send, int send_count,
                             MPI_Datatype send_type, void *recv, int recv_count,
                             MPI_Datatype recv_type, int root, MPI_Comm comm) {
  (void)recv_count;
  (void)recv_type;
  (void)root;
  (void)comm;
  memmove(recv, send, (size_t)send_count * (size_t)send_type);
  return MPI_SUCCESS;
}
static inline int MPI_Gatherv(const void *send, int send_count,
                              MPI_Datatype send_type, void *recv,
                              const int *recv_counts, const int *displs,
                              MPI_Datatype recv_type, int root, MPI_Comm comm) {
  (void)recv_counts;
  (void)root;
  (void)comm;
  if (send_count > 0)
    memmove((char *)recv + (size_t)displs[0] * (size_t)recv_type, send,
            (size_t)send_count * (size_t)send_type);
  return MPI_SUCCESS;
}
static inline int MPI_Abort(MPI_Comm comm, int code) {
  (void)comm;
  fflush(NULL);
  exit(code);
}
static inline int MPI_Error_string(int code, char *text, int *len) {
  *len = snprintf(text, MPI_MAX_ERROR_STRING, "MPI error %d", code);
  return MPI_SUCCESS;
}

#endif /* BRAID_RT_CUDA_COMM_MPI_SINGLE_H */
