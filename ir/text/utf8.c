#include "utf8.h"

int hx_utf8_decode(const char *p, size_t avail, uint32_t *cp) {
  const unsigned char *s = (const unsigned char *)p;
  if (avail == 0)
    return 0;
  if (s[0] < 0x80) {
    *cp = s[0];
    return 1;
  }
  /* The lead byte gives the length and the smallest code point that needs
   * it (anything below is an overlong form). */
  int len;
  uint32_t min, v;
  if (s[0] >= 0xc2 && s[0] <= 0xdf)
    len = 2, min = 0x80, v = s[0] & 0x1f;
  else if (s[0] >= 0xe0 && s[0] <= 0xef)
    len = 3, min = 0x800, v = s[0] & 0x0f;
  else if (s[0] >= 0xf0 && s[0] <= 0xf4)
    len = 4, min = 0x10000, v = s[0] & 0x07;
  else
    return 0; /* a continuation byte, 0xc0/0xc1 (always overlong) or 0xf5.. */
  if ((size_t)len > avail)
    return 0;
  for (int i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    v = v << 6 | (s[i] & 0x3f);
  }
  if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
    return 0;
  *cp = v;
  return len;
}

int hx_utf8_printable(const char *p, size_t avail) {
  uint32_t cp;
  int n = hx_utf8_decode(p, avail, &cp);
  return n == 0 || cp < 0x20 || cp == 0x7f ? 0 : n;
}

int hx_utf8_encode(uint32_t cp, char *out) {
  unsigned char *o = (unsigned char *)out;
  if (cp < 0x80) {
    o[0] = (unsigned char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (unsigned char)(0xc0 | cp >> 6);
    o[1] = (unsigned char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (unsigned char)(0xe0 | cp >> 12);
    o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
    o[2] = (unsigned char)(0x80 | (cp & 0x3f));
    return 3;
  }
  o[0] = (unsigned char)(0xf0 | cp >> 18);
  o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
  o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
  o[3] = (unsigned char)(0x80 | (cp & 0x3f));
  return 4;
}
