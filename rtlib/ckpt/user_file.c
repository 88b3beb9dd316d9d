/* Regular files only, and printable names (see user_file.h). */
#include "user_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What a file of mode is, for the refusal: NULL for a regular file. */
static const char *not_regular(mode_t mode) {
  return S_ISREG(mode)    ? NULL
         : S_ISFIFO(mode) ? "a FIFO"
         : S_ISCHR(mode)  ? "a character device"
         : S_ISBLK(mode)  ? "a block device"
         : S_ISDIR(mode)  ? "a directory"
         : S_ISSOCK(mode) ? "a socket"
                          : "not a regular file";
}

static int refuse(const char *path, const char *kind, char *err, size_t err_size) {
  char shown[512];
  snprintf(err, err_size, "%s: is %s, not a regular file: refusing to read it",
           hx_rt_printable(path, shown, sizeof shown), kind);
  return -1;
}

int hx_rt_open_regular(const char *path, char *err, size_t err_size) {
  char shown[512];
  struct stat st;
  /* stat first: a device or FIFO is refused without being opened at all */
  if (stat(path, &st) == 0 && not_regular(st.st_mode))
    return refuse(path, not_regular(st.st_mode), err, err_size);
  /* O_NONBLOCK: a FIFO put there since the stat does not block the open */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(err, err_size, "%s: cannot open: %s", hx_rt_printable(path, shown, sizeof shown),
             strerror(errno));
    return -1;
  }
  const char *kind = fstat(fd, &st) != 0 ? "not readable" : not_regular(st.st_mode);
  int flags = kind ? -1 : fcntl(fd, F_GETFL);
  if (!kind && (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0))
    kind = "not readable";
  if (kind) {
    close(fd);
    return refuse(path, kind, err, err_size);
  }
  return fd;
}

FILE *hx_rt_fopen_regular(const char *path, char *err, size_t err_size) {
  int fd = hx_rt_open_regular(path, err, err_size);
  FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
  if (fd >= 0 && !f) {
    char shown[512];
    snprintf(err, err_size, "%s: cannot open: %s", hx_rt_printable(path, shown, sizeof shown),
             strerror(errno));
    close(fd);
  }
  return f;
}

const char *hx_rt_printable(const char *s, char *buf, size_t size) {
  static const char hex[] = "0123456789abcdef";
  if (size == 0)
    return buf;
  size_t n = 0, room = size - 1;
  bool cut = false;
  for (const unsigned char *p = (const unsigned char *)s; *p && !cut; p++) {
    char one[5] = {(char)*p, '\0'};
    if (*p == '\\')
      memcpy(one, "\\\\", 3);
    else if (*p < 0x20 || *p > 0x7e)
      one[0] = '\\', one[1] = 'x', one[2] = hex[*p >> 4], one[3] = hex[*p & 15], one[4] = '\0';
    size_t k = strlen(one);
    cut = n + k > room;
    if (!cut)
      memcpy(buf + n, one, k), n += k;
  }
  if (cut) { /* the end replaced by "..." (a cut escape stays printable) */
    n = room >= 3 ? room - 3 : 0;
    for (int i = 0; i < 3 && n < room; i++)
      buf[n++] = '.';
  }
  buf[n] = '\0';
  return buf;
}

void hx_rt_folder_of(const char *path, char *buf, size_t size) {
  snprintf(buf, size, "%s", path);
  char *slash = strrchr(buf, '/');
  if (slash)
    *(slash == buf ? slash + 1 : slash) = '\0';
  else
    snprintf(buf, size, ".");
}

bool hx_rt_fsync_folder_of(const char *path) {
  char dir[4200];
  hx_rt_folder_of(path, dir, sizeof dir);
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  if (fd < 0)
    return false;
  bool ok = fsync(fd) == 0;
  close(fd);
  return ok;
}
