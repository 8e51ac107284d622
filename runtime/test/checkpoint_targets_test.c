/*===- checkpoint_targets_test.c - One checkpoint for every target -------===*/
/*
 * Saves or resumes the same parameter table through the program runtime
 * (braid_rt_program_save / _resume), whatever memory.h and communication
 * backend it is linked with:
 *   braid-rt-checkpoint-targets           the CPU target (device memory is
 *                                         host memory; MPI)
 *   braid-rt-checkpoint-targets_staging   device memory the host cannot
 *                                         touch (staging_device.c; MPI)
 *   braid-rt-checkpoint-targets_cuda_fake the CUDA target's own code on the
 *                                         host: memory.cu and the CUDA
 *                                         backend (NCCL) over fake_device.c,
 *                                         one rank
 *   braid-rt-checkpoint-targets_cuda      the CUDA target (a GPU; built
 *                                         where CUDA is, run by
 *                                         scripts/gpu-check.sh)
 * checkpoint_targets.sh saves with two of them and checks that the files
 * are the same bytes and that each resumes the other's.
 *
 *   PROGRAM save DIR     the table below, in device buffers, saved at step 7
 *   PROGRAM resume DIR   resumed into fresh device buffers: step 7 and every
 *                        element equal to the table, bit for bit
 *
 * Runs on any number of ranks as a mesh dp 1 x tp N. The table: a
 * replicated vector, tensors split along either dimension over tp, and one
 * strided over 3 blocks (a fused projection's layout). Values are random
 * bit patterns of finite floats (negative zero and subnormals included),
 * the same on every target.
 */

#include "braid/rt/memory.h"
#include "braid/rt/program_spmd.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NSLOTS = 4, STEP = 7, TP_MASK = 2 };

static const int64_t shape_b[1] = {6}, spec_b[1] = {0};
static const int64_t shape_w[2] = {4, 6}, spec_w[3] = {0, 1, 1};
static const int64_t shape_m[2] = {8, 3}, spec_m[3] = {1, 1, 0};
static const int64_t shape_qkv[2] = {6, 4}, spec_qkv[3] = {1, 1, 0},
                     blocks_qkv[2] = {3, 1};

static const braid_rt_program_slot_t slots[NSLOTS] = {
    {"b", 1, shape_b, spec_b, -1, NULL},
    {"w", 2, shape_w, spec_w, -1, NULL},
    {"adamw.m.w", 2, shape_m, spec_m, -1, NULL},
    {"qkv", 2, shape_qkv, spec_qkv, -1, blocks_qkv},
};

static int64_t local_count(const braid_rt_program_slot_t *slot) {
  int64_t local[16], offsets[16], n = 1;
  braid_rt_program_block(slot->rank, slot->global, slot->spec, local, offsets);
  for (int64_t d = 0; d < slot->rank; ++d)
    n *= local[d];
  return n;
}

/* Element i of this rank's buffer of slot s: a finite float from a hash of
   (slot, tp position for a split slot, i). A replicated slot holds the
   same values on every rank. */
static float value(int s, int64_t i) {
  uint64_t position =
      s == 0 ? 0 : (uint64_t)braid_rt_program_group_position(TP_MASK);
  uint64_t h = ((uint64_t)s * 1000003u + position) * 0x9e3779b97f4a7c15ull +
               (uint64_t)i * 0xbf58476d1ce4e5b9ull;
  h ^= h >> 31;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 29;
  uint32_t bits = (uint32_t)h;
  if ((bits & 0x7f800000u) == 0x7f800000u) /* no inf or NaN */
    bits &= ~0x40000000u;
  if (i == 0)
    bits = 0x80000000u; /* -0.0f */
  if (i == 1)
    bits = 0x00000001u; /* the smallest subnormal */
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

int main(int argc, char **argv) {
  if (argc != 3 ||
      (strcmp(argv[1], "save") != 0 && strcmp(argv[1], "resume") != 0)) {
    fprintf(stderr, "usage: %s save|resume DIR\n", argv[0]);
    return 2;
  }
  int save = strcmp(argv[1], "save") == 0;
  const char *dir = argv[2];
  const char *size = getenv("OMPI_COMM_WORLD_SIZE");
  int64_t dims[2] = {1, size ? atoi(size) : 1};
  const char *names[2] = {"dp", "tp"};
  braid_rt_program_spmd_start(&argc, &argv, 2, dims, names);

  float *buffers[NSLOTS];
  float *want[NSLOTS];
  for (int s = 0; s < NSLOTS; ++s) {
    int64_t n = local_count(&slots[s]);
    want[s] = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; ++i)
      want[s][i] = value(s, i);
    buffers[s] = braid_rt_program_alloc_f32(n);
    if (save)
      braid_rt_program_to_device(buffers[s], want[s], (size_t)n * sizeof(float),
                                 "the table");
  }
  int failed = 0;
  if (save) {
    braid_rt_program_save(dir, STEP, NSLOTS, slots, buffers, 0);
  } else {
    int64_t step = braid_rt_program_resume(dir, NSLOTS, slots, buffers);
    if (step != STEP) {
      fprintf(stderr, "rank %d: resumed step %lld, saved %d\n",
              braid_rt_program_spmd_rank(), (long long)step, STEP);
      failed = 1;
    }
    for (int s = 0; s < NSLOTS; ++s) {
      int64_t n = local_count(&slots[s]);
      float *got = malloc((size_t)n * sizeof(float));
      braid_rt_program_to_host(got, buffers[s], (size_t)n * sizeof(float),
                               "the resumed table");
      for (int64_t i = 0; i < n; ++i)
        if (memcmp(&got[i], &want[s][i], sizeof(float)) != 0) {
          fprintf(stderr, "rank %d: '%s' element %lld: resumed %a, saved %a\n",
                  braid_rt_program_spmd_rank(), slots[s].name, (long long)i,
                  (double)got[i], (double)want[s][i]);
          failed = 1;
          break;
        }
      free(got);
    }
  }
  braid_rt_program_checkpoint_outcome(failed);
  if (braid_rt_program_spmd_rank() == 0)
    printf("checkpoint_targets_test: %s step %d on %lld rank(s), device "
           "memory %s host memory\n",
           save ? "saved" : "resumed bit for bit", STEP, (long long)dims[1],
           braid_rt_memory_is_host() ? "is" : "is not");
  fflush(stdout);
  for (int s = 0; s < NSLOTS; ++s)
    free(want[s]);
  braid_rt_program_spmd_finish();
  return 0;
}
