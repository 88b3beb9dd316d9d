/* Parses each generated C file with libclang and fails on any diagnostic,
 * warnings included: generated code must be clean for every C front end, not
 * only the one the Makefile happens to use.
 *
 *   parse_check -I DIR [-I DIR...] FILE.c...
 */
#include <clang-c/Index.h>
#include <stdio.h>
#include <string.h>

enum { MAX_ARGS = 32 };

static int check_file(CXIndex index, const char *path, const char *const *args, int nargs) {
  CXTranslationUnit tu = NULL;
  enum CXErrorCode rc =
      clang_parseTranslationUnit2(index, path, args, nargs, NULL, 0, CXTranslationUnit_None, &tu);
  if (rc != CXError_Success || !tu) {
    fprintf(stderr, "parse_check: %s: libclang could not parse (error %d)\n", path, (int)rc);
    return 1;
  }
  unsigned n = clang_getNumDiagnostics(tu);
  for (unsigned i = 0; i < n; i++) {
    CXDiagnostic d = clang_getDiagnostic(tu, i);
    CXString text = clang_formatDiagnostic(d, clang_defaultDiagnosticDisplayOptions());
    fprintf(stderr, "%s\n", clang_getCString(text));
    clang_disposeString(text);
    clang_disposeDiagnostic(d);
  }
  clang_disposeTranslationUnit(tu);
  return n > 0;
}

int main(int argc, char **argv) {
  const char *args[MAX_ARGS] = {"-std=c11", "-Wall", "-Wextra", "-Wpedantic"};
  int nargs = 4, failures = 0, files = 0;
  CXIndex index = clang_createIndex(0, 0);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-I") && i + 1 < argc && nargs + 2 <= MAX_ARGS) {
      args[nargs++] = "-I";
      args[nargs++] = argv[++i];
      continue;
    }
    failures += check_file(index, argv[i], args, nargs);
    files++;
  }
  clang_disposeIndex(index);
  printf("parse_check: %d file(s), %d with diagnostics\n", files, failures);
  return files == 0 || failures ? 1 : 0;
}
