/*===- expect_exit.c - Run a command, check its exit, time and output ---===*/
/*
 * expect_exit [--code N] --within SECONDS [--output TEXT]... -- COMMAND...
 *
 * Runs COMMAND with stdout and stderr captured, and succeeds only if it
 * exits within SECONDS with status N (without --code: any non-zero status)
 * and its output contains every TEXT. A command still running at the
 * deadline is killed with its process group. The failure-handling tests
 * need this because ctest can only expect success or any failure
 * (WILL_FAIL), cannot bound the time a failure takes, and ignores the exit
 * status once it matches output (PASS_REGULAR_EXPRESSION).
 */

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int usage(void) {
  fprintf(stderr, "usage: expect_exit [--code N] --within SECONDS "
                  "[--output TEXT]... -- COMMAND...\n");
  return 2;
}

int main(int argc, char **argv) {
  int expected_code = -1;
  double within = -1;
  const char *outputs[16];
  int noutputs = 0, i = 1;
  for (; i < argc && strcmp(argv[i], "--") != 0; ++i) {
    if (strcmp(argv[i], "--code") == 0 && i + 1 < argc)
      expected_code = atoi(argv[++i]);
    else if (strcmp(argv[i], "--within") == 0 && i + 1 < argc)
      within = atof(argv[++i]);
    else if (strcmp(argv[i], "--output") == 0 && i + 1 < argc && noutputs < 16)
      outputs[noutputs++] = argv[++i];
    else
      return usage();
  }
  if (within <= 0 || i + 1 >= argc)
    return usage();
  char **command = argv + i + 1;

  int fds[2];
  if (pipe(fds) != 0) {
    perror("expect_exit: pipe");
    return 2;
  }
  double start = now();
  pid_t pid = fork();
  if (pid < 0) {
    perror("expect_exit: fork");
    return 2;
  }
  if (pid == 0) {
    setpgid(0, 0); /* so that a timeout can kill mpirun and its ranks */
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    execvp(command[0], command);
    perror("expect_exit: exec");
    _exit(127);
  }
  close(fds[1]);

  size_t size = 0, capacity = 1 << 16;
  char *output = malloc(capacity);
  int timed_out = 0, open = 1;
  while (open) {
    double left = within - (now() - start);
    if (left <= 0) {
      timed_out = 1;
      break;
    }
    struct pollfd p = {fds[0], POLLIN, 0};
    int ready = poll(&p, 1, (int)(left * 1000) + 1);
    if (ready < 0 && errno != EINTR)
      break;
    if (ready <= 0)
      continue;
    if (size + 4096 + 1 > capacity)
      output = realloc(output, capacity *= 2);
    ssize_t n = read(fds[0], output + size, 4096);
    if (n <= 0)
      open = 0;
    else
      size += (size_t)n;
  }
  output[size] = '\0';
  if (timed_out)
    kill(-pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  double elapsed = now() - start;

  int ok = 1;
  if (timed_out) {
    fprintf(stderr, "FAIL: still running after %.1f s; killed\n", within);
    ok = 0;
  } else if (!WIFEXITED(status)) {
    fprintf(stderr, "FAIL: ended by signal %d, expected an exit\n",
            WTERMSIG(status));
    ok = 0;
  } else if (expected_code >= 0 ? WEXITSTATUS(status) != expected_code
                                : WEXITSTATUS(status) == 0) {
    fprintf(stderr, "FAIL: exit code %d, expected %s%d\n", WEXITSTATUS(status),
            expected_code >= 0 ? "" : "non-zero, not ",
            expected_code >= 0 ? expected_code : 0);
    ok = 0;
  }
  for (int k = 0; k < noutputs; ++k) {
    if (!strstr(output, outputs[k])) {
      fprintf(stderr, "FAIL: the output lacks '%s'\n", outputs[k]);
      ok = 0;
    }
  }
  if (!ok)
    fprintf(stderr, "--- output ---\n%s--- end ---\n", output);
  else
    printf("ok: exit code %d after %.2f s\n", WEXITSTATUS(status), elapsed);
  free(output);
  return ok ? 0 : 1;
}
