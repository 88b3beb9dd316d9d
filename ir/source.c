/* Input files: the one reader behind every file hexic takes (.hx sources
 * and plan.json). It reports through diag.c; the line index a diagnostic
 * prints from lives there (hx_source_init), so the two files do not call
 * into each other.
 *
 * The reader takes only regular files of at most HX_INPUT_LIMIT bytes:
 * `hexic /dev/zero` or `--plan /dev/urandom` would otherwise read until the
 * memory runs out, and a FIFO would block forever. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diag.h"
#include "loc.h"

static const char *not_regular_kind(mode_t mode) {
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISFIFO(mode))
    return "a pipe";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

static void report_too_large(const char *path, long long size) {
  hx_error_plain("cannot read '%s': it has %lld bytes, more than the %ld MiB (%ld bytes) hexic "
                 "reads from one input file",
                 path, size, HX_INPUT_LIMIT >> 20, HX_INPUT_LIMIT);
}

/* Checks what fd is before reading it: a regular file within the limit. */
static bool readable_kind(int fd, const char *path, size_t *size_hint) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    hx_error_plain("cannot read '%s': %s", path, strerror(errno));
    return false;
  }
  if (S_ISDIR(st.st_mode)) {
    hx_error_plain("cannot read '%s': %s", path, strerror(EISDIR));
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    hx_error_plain("cannot read '%s': it is %s; hexic reads only regular files", path,
                   not_regular_kind(st.st_mode));
    return false;
  }
  if (st.st_size > HX_INPUT_LIMIT) {
    report_too_large(path, (long long)st.st_size);
    return false;
  }
  *size_hint = (size_t)st.st_size;
  return true;
}

/* Reads fd to its end, never more than HX_INPUT_LIMIT + 1 bytes (a file
 * that grew after fstat is still refused, not read without bound). */
static char *read_bounded(int fd, const char *path, size_t size_hint, size_t *len_out) {
  size_t cap = size_hint + 1, len = 0;
  char *buf = malloc(cap);
  if (!buf)
    hx_internal_error("out of memory reading '%s'", path);
  for (;;) {
    if (len == cap) {
      if (cap > (size_t)HX_INPUT_LIMIT) {
        report_too_large(path, (long long)len);
        free(buf);
        return NULL;
      }
      cap = cap * 2 < (size_t)HX_INPUT_LIMIT + 1 ? cap * 2 : (size_t)HX_INPUT_LIMIT + 1;
      char *bigger = realloc(buf, cap);
      if (!bigger)
        hx_internal_error("out of memory reading '%s'", path);
      buf = bigger;
    }
    ssize_t got = read(fd, buf + len, cap - len);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      hx_error_plain("cannot read '%s': %s", path, strerror(errno));
      free(buf);
      return NULL;
    }
    if (got == 0)
      break;
    len += (size_t)got;
  }
  *len_out = len;
  return buf;
}

char *hx_read_input(const char *path, size_t *len_out) {
  /* O_NONBLOCK: opening a FIFO with no writer must not hang before fstat
   * can refuse it; it changes nothing for a regular file. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    hx_error_plain("cannot read '%s': %s", path, strerror(errno));
    return NULL;
  }
  size_t size_hint = 0;
  char *buf = readable_kind(fd, path, &size_hint) ? read_bounded(fd, path, size_hint, len_out)
                                                  : NULL;
  close(fd);
  return buf;
}
