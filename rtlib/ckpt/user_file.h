/* Opening the files a user names for reading (token data, safetensors files
 * and their shards, JSON: config.json, model.safetensors.index.json), and
 * printing what such files hold.
 *
 * Only a regular file is read: a FIFO blocks open() until a writer comes (a
 * hang), /dev/zero and its kin never end; both are refused by name before
 * anything is read. The path is stat'ed first (so a device is not even
 * opened), then opened O_NONBLOCK (a FIFO swapped in between does not block
 * the open) and fstat'ed: what was opened is what is checked. */
#ifndef HX_CKPT_USER_FILE_H
#define HX_CKPT_USER_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* A read-only descriptor of path, a regular file (blocking reads, close on
 * exec), or -1 with "PATH: cannot open: ..." or "PATH: is a FIFO, not a
 * regular file: refusing to read it" in err. */
int hx_rt_open_regular(const char *path, char *err, size_t err_size);

/* The same as a stdio stream ("rb"), or NULL with err set. */
FILE *hx_rt_fopen_regular(const char *path, char *err, size_t err_size);

/* s as printable ASCII for a terminal or a one-line comment: bytes 0x20-0x7e
 * except the backslash as they are, every other byte (control characters,
 * escape sequences, newlines, bytes of UTF-8) as \xNN and the backslash as
 * \\; truncated (ending "...") to fit size. Returns buf. */
const char *hx_rt_printable(const char *s, char *buf, size_t size);

/* The folder that holds path, into buf: "." for a bare name, "/" for a
 * file at the root. */
void hx_rt_folder_of(const char *path, char *buf, size_t size);

/* fsync of the folder that holds path ("." for a bare name, "/" for a file
 * at the root): what makes a rename into that folder durable. False when
 * the folder cannot be opened or synced. */
bool hx_rt_fsync_folder_of(const char *path);

#endif
