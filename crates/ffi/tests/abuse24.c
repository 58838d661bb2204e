/*
 * A careless host against the C ABI: every pointer argument NULL (those the
 * header says may be NULL and those it says may not), NULL with a length,
 * bytes that are not UTF-8 and strings holding a NUL byte, unknown enum
 * values and flags. Each fallible call must answer the documented code with
 * an error object whose message names what was refused, leave `*err` NULL
 * on success, and leave its outputs as they were when it refuses; nothing
 * may crash, and a run under valgrind must show no error and no leak.
 *
 * Compiled and run by crates/ffi/tests/abuse24.rs with the directory to work
 * in as its only argument. Prints one line per failed check and exits 1 when
 * any failed.
 */
#define _POSIX_C_SOURCE 200809L

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandgate.h"

static int failures;
static int checks;

#define CHECK(cond)                                                            \
  do {                                                                         \
    checks++;                                                                  \
    if (!(cond)) {                                                             \
      failures++;                                                              \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                          \
  } while (0)

/* A value no call may write into `*err` but the library's own. */
#define STALE ((sg_error *)(uintptr_t)0x5a5a5a5a)

static sg_error *E;

/*
 * Runs `call` (which passes `&E`) and expects `want`; on a refusal the error
 * object must carry the same code and a message holding `word` (NULL: any
 * non-empty message); on success `E` must be NULL.
 */
#define EXPECT(call, want, word)                                               \
  do {                                                                         \
    E = STALE;                                                                 \
    sg_status got_ = (call);                                                   \
    expect(__LINE__, #call, got_, (want), (word));                             \
  } while (0)

static void expect(int line, const char *what, sg_status got, sg_status want,
                   const char *word) {
  checks++;
  if (got != want) {
    failures++;
    fprintf(stderr, "line %d: %s: got %s (%s), want %s\n", line, what,
            sg_code_name(got),
            (E != NULL && E != STALE) ? sg_error_message(E) : "no error object",
            sg_code_name(want));
  }
  if (got == SG_OK) {
    if (E != NULL) {
      failures++;
      fprintf(stderr, "line %d: %s: success left *err %p\n", line, what,
              (void *)E);
    }
    return;
  }
  if (E == NULL || E == STALE) {
    failures++;
    fprintf(stderr, "line %d: %s: refused (%s) with no error object\n", line,
            what, sg_code_name(got));
    return;
  }
  const char *msg = sg_error_message(E);
  if (sg_error_code(E) != got || msg == NULL || msg[0] == '\0' ||
      sg_error_code_name(E) == NULL ||
      strcmp(sg_error_code_name(E), sg_code_name(got)) != 0) {
    failures++;
    fprintf(stderr, "line %d: %s: error object disagrees with %s: %s\n", line,
            what, sg_code_name(got), msg ? msg : "(NULL message)");
  } else if (word != NULL && strstr(msg, word) == NULL) {
    failures++;
    fprintf(stderr, "line %d: %s: message `%s` does not name `%s`\n", line,
            what, msg, word);
  }
  if (got == SG_E_INTERNAL) {
    failures++;
    fprintf(stderr, "line %d: %s: E_INTERNAL (a bug): %s\n", line, what, msg);
  }
  sg_error_free(E);
  E = NULL;
}

#define S(lit) (lit), (sizeof(lit) - 1)
#define B(lit) (const uint8_t *)(lit), (sizeof(lit) - 1)

/* Fills an output with a pattern, to see that a refusal left it alone. */
#define POISON(x) memset(&(x), 0xa5, sizeof(x))
static int poisoned(const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i] != 0xa5)
      return 0;
  return 1;
}
#define UNTOUCHED(x) CHECK(poisoned(&(x), sizeof(x)))

static char dir[512];
static char buf[1024];

static const char *at(const char *rel) {
  snprintf(buf, sizeof buf, "%s/%s", dir, rel);
  return buf;
}

static void put_file(const char *rel, const char *text) {
  FILE *f = fopen(at(rel), "w");
  if (f == NULL) {
    perror(rel);
    exit(2);
  }
  fputs(text, f);
  fclose(f);
}

static const char NOT_UTF8[] = "a\xff" "b";
static const char WITH_NUL[] = "a\0b";

static void the_error_accessors_take_null(void) {
  CHECK(sg_error_code(NULL) == SG_E_REQUEST);
  CHECK(sg_error_code_name(NULL) == NULL);
  CHECK(sg_error_message(NULL) == NULL);
  CHECK(sg_error_path(NULL) == NULL);
  CHECK(sg_error_pattern(NULL) == NULL);
  CHECK(sg_error_key(NULL) == NULL);
  CHECK(sg_error_errno(NULL) == 0);
  CHECK(sg_code_name(0xffffffffu) == NULL);
  CHECK(sg_code_name(26) == NULL);
  CHECK(sg_code_name(SG_OK) != NULL && strcmp(sg_code_name(SG_OK), "OK") == 0);
  /* Every free takes NULL. */
  sg_error_free(NULL);
  sg_bytes_free(NULL);
  sg_executor_free(NULL);
  sg_exec_result_free(NULL);
  sg_abort_free(NULL);
  sg_fetcher_free(NULL);
  sg_policy_free(NULL);
  sg_root_free(NULL);
  sg_sandbox_options_free(NULL);
  sg_sandbox_free(NULL);
  CHECK(!sg_abort_is_triggered(NULL));
  /* A zeroed buffer, and one freed twice. */
  sg_bytes zero = {0};
  sg_bytes_free(&zero);
  sg_exec_result r0;
  memset(&r0, 0, sizeof r0);
  sg_exec_result_free(&r0);
  sg_exec_result_free(&r0);
}

static void policy_calls(sg_policy *p) {
  sg_policy *po;
  sg_bytes b;
  POISON(po);
  EXPECT(sg_policy_load(NULL, 4, &po, &E), SG_E_REQUEST, "path");
  EXPECT(sg_policy_load(S(NOT_UTF8), &po, &E), SG_E_REQUEST, "UTF-8");
  UNTOUCHED(po);
  EXPECT(sg_policy_load(S("x.toml"), NULL, &E), SG_E_REQUEST, "out");
  EXPECT(sg_policy_parse(NULL, 3, S("/"), &po, &E), SG_E_REQUEST, "text");
  EXPECT(sg_policy_parse(B(""), NULL, 2, &po, &E), SG_E_REQUEST, "base_dir");
  EXPECT(sg_policy_parse(B(""), S(NOT_UTF8), &po, &E), SG_E_REQUEST,
         "base_dir");
  EXPECT(sg_policy_parse(B(""), S("/"), NULL, &E), SG_E_REQUEST, "out");
  UNTOUCHED(po);
  EXPECT(sg_policy_from_options(NULL, 2, S("/"), &po, &E), SG_E_REQUEST,
         "options_json");
  EXPECT(sg_policy_from_options(S(NOT_UTF8), S("/"), &po, &E), SG_E_REQUEST,
         "UTF-8");
  EXPECT(sg_policy_from_options(S("{}"), NULL, 1, &po, &E), SG_E_REQUEST,
         "base_dir");
  EXPECT(sg_policy_from_options(S("{}"), S("/"), NULL, &E), SG_E_REQUEST,
         "out");
  /* NULL with length 0 is the empty string: not a JSON object, and no
   * directory to resolve against. */
  EXPECT(sg_policy_from_options(NULL, 0, S("/"), &po, &E), SG_E_POLICY,
         "JSON");
  EXPECT(sg_policy_from_options(S("{}"), NULL, 0, &po, &E), SG_E_POLICY,
         "base directory");
  UNTOUCHED(po);

  POISON(b);
  EXPECT(sg_policy_digest(NULL, &b, &E), SG_E_REQUEST, "policy");
  EXPECT(sg_policy_digest(p, NULL, &E), SG_E_REQUEST, "out");
  EXPECT(sg_policy_summary(NULL, false, &b, &E), SG_E_REQUEST, "policy");
  EXPECT(sg_policy_summary(p, true, NULL, &E), SG_E_REQUEST, "out");
  EXPECT(sg_policy_authorize(NULL, S("https"), S("example.com"), -1, NULL, 0,
                             false, &b, &E),
         SG_E_REQUEST, "policy");
  EXPECT(sg_policy_authorize(p, NULL, 5, S("example.com"), -1, NULL, 0, false,
                             &b, &E),
         SG_E_REQUEST, "scheme");
  EXPECT(sg_policy_authorize(p, S("https"), NULL, 3, -1, NULL, 0, false, &b,
                             &E),
         SG_E_REQUEST, "host");
  EXPECT(sg_policy_authorize(p, S("https"), S(NOT_UTF8), -1, NULL, 0, false,
                             &b, &E),
         SG_E_REQUEST, "host");
  EXPECT(sg_policy_authorize(p, S("https"), S("example.com"), 65536, NULL, 0,
                             false, &b, &E),
         SG_E_REQUEST, "65536");
  EXPECT(sg_policy_authorize(p, S("https"), S("example.com"), -1, NULL, 7,
                             false, &b, &E),
         SG_E_REQUEST, "ip");
  EXPECT(sg_policy_authorize(p, S("https"), S("example.com"), -1,
                             S("not-an-ip"), false, &b, &E),
         SG_E_REQUEST, "not-an-ip");
  UNTOUCHED(b);
  /* `decision` may be NULL; the policy grants no network. */
  EXPECT(sg_policy_authorize(p, S("https"), S("example.com"), 443, NULL, 0,
                             true, NULL, &E),
         SG_E_NET_DENIED, NULL);
  /* `err` may be NULL on every call. */
  CHECK(sg_policy_digest(NULL, &b, NULL) == SG_E_REQUEST);
  UNTOUCHED(b);
}

static void root_calls(void) {
  sg_root *r = NULL, *r2;
  sg_bytes b;
  sg_stat st;
  int32_t fd;
  POISON(r2);
  EXPECT(sg_root_open(NULL, 1, SG_RESOLVER_AUTO, &r2, &E), SG_E_REQUEST,
         "dir");
  EXPECT(sg_root_open(dir, strlen(dir), 7, &r2, &E), SG_E_REQUEST, "resolver");
  EXPECT(sg_root_open(dir, strlen(dir), SG_RESOLVER_AUTO, NULL, &E),
         SG_E_REQUEST, "out");
  UNTOUCHED(r2);
  EXPECT(sg_root_open(dir, strlen(dir), SG_RESOLVER_AUTO, &r, &E), SG_OK,
         NULL);

  EXPECT(sg_root_open_root(NULL, S("sub"), &r2, &E), SG_E_REQUEST, "root");
  EXPECT(sg_root_open_root(r, NULL, 3, &r2, &E), SG_E_REQUEST, "path");
  EXPECT(sg_root_open_root(r, S("sub"), NULL, &E), SG_E_REQUEST, "out");
  UNTOUCHED(r2);
  POISON(b);
  EXPECT(sg_root_name(NULL, &b, &E), SG_E_REQUEST, "root");
  EXPECT(sg_root_name(r, NULL, &E), SG_E_REQUEST, "out");
  UNTOUCHED(b);
  POISON(fd);
  EXPECT(sg_root_open_file(NULL, S("f"), O_RDONLY, 0, &fd, &E), SG_E_REQUEST,
         "root");
  EXPECT(sg_root_open_file(r, NULL, 1, O_RDONLY, 0, &fd, &E), SG_E_REQUEST,
         "path");
  EXPECT(sg_root_open_file(r, S("f"), O_RDONLY, 0, NULL, &E), SG_E_REQUEST,
         "fd");
  EXPECT(sg_root_open_file(r, S("f"), O_RDONLY | O_DIRECTORY, 0, &fd, &E),
         SG_E_REQUEST, "flags");
  EXPECT(sg_root_open_file(r, S("f"), O_ACCMODE, 0, &fd, &E), SG_E_REQUEST,
         "access mode");
  EXPECT(sg_root_open_file(r, S("new"), O_WRONLY | O_CREAT, 010000000, &fd,
                           &E),
         SG_E_REQUEST, "mode");
  UNTOUCHED(fd);
  EXPECT(sg_root_remove(NULL, S("f"), &E), SG_E_REQUEST, "root");
  EXPECT(sg_root_remove(r, NULL, 1, &E), SG_E_REQUEST, "path");
  EXPECT(sg_root_mkdir(NULL, S("d"), 0755, &E), SG_E_REQUEST, "root");
  EXPECT(sg_root_mkdir(r, NULL, 1, 0755, &E), SG_E_REQUEST, "path");
  EXPECT(sg_root_mkdir(r, S("d"), 0100000, &E), SG_E_REQUEST, "mode");
  POISON(st);
  EXPECT(sg_root_stat(NULL, S("f"), &st, &E), SG_E_REQUEST, "root");
  EXPECT(sg_root_stat(r, NULL, 1, &st, &E), SG_E_REQUEST, "path");
  EXPECT(sg_root_stat(r, S("f"), NULL, &E), SG_E_REQUEST, "out");
  EXPECT(sg_root_lstat(NULL, S("f"), &st, &E), SG_E_REQUEST, "root");
  EXPECT(sg_root_lstat(r, NULL, 1, &st, &E), SG_E_REQUEST, "path");
  EXPECT(sg_root_lstat(r, S("f"), NULL, &E), SG_E_REQUEST, "out");
  UNTOUCHED(st);
  EXPECT(sg_root_readlink(NULL, S("l"), &b, &E), SG_E_REQUEST, "root");
  EXPECT(sg_root_readlink(r, NULL, 1, &b, &E), SG_E_REQUEST, "path");
  EXPECT(sg_root_readlink(r, S("l"), NULL, &E), SG_E_REQUEST, "out");
  UNTOUCHED(b);
  EXPECT(sg_root_rename(NULL, S("f"), S("g"), &E), SG_E_REQUEST, "root");
  EXPECT(sg_root_rename(r, NULL, 1, S("g"), &E), SG_E_REQUEST, "from");
  EXPECT(sg_root_rename(r, S("f"), NULL, 1, &E), SG_E_REQUEST, "to");

  /* A name holding a NUL byte names no file: refused, never truncated to
   * the bytes before it (which would be `a`, a file that exists). */
  put_file("a", "A");
  POISON(st);
  EXPECT(sg_root_stat(r, S(WITH_NUL), &st, &E), SG_E_PATH_INVALID, NULL);
  EXPECT(sg_root_lstat(r, S(WITH_NUL), &st, &E), SG_E_PATH_INVALID, NULL);
  UNTOUCHED(st);
  POISON(fd);
  EXPECT(sg_root_open_file(r, S(WITH_NUL), O_RDONLY, 0, &fd, &E),
         SG_E_PATH_INVALID, NULL);
  EXPECT(sg_root_open_file(r, S(WITH_NUL), O_WRONLY | O_CREAT, 0644, &fd, &E),
         SG_E_PATH_INVALID, NULL);
  UNTOUCHED(fd);
  EXPECT(sg_root_remove(r, S(WITH_NUL), &E), SG_E_PATH_INVALID, NULL);
  EXPECT(sg_root_mkdir(r, S(WITH_NUL), 0755, &E), SG_E_PATH_INVALID, NULL);
  EXPECT(sg_root_rename(r, S("a"), S(WITH_NUL), &E), SG_E_PATH_INVALID, NULL);
  EXPECT(sg_root_rename(r, S(WITH_NUL), S("c"), &E), SG_E_PATH_INVALID, NULL);
  POISON(r2);
  EXPECT(sg_root_open_root(r, S(WITH_NUL), &r2, &E), SG_E_PATH_INVALID, NULL);
  UNTOUCHED(r2);
  CHECK(access(at("a"), F_OK) == 0);
  /* An empty name, NULL or not, names nothing: every `sg_root_*` call
   * answers E_NOT_FOUND (ENOENT), as `Root` does in Rust and in each
   * binding, and as open(2) does (cabi25). */
  POISON(st);
  POISON(fd);
  POISON(b);
  POISON(r2);
  EXPECT(sg_root_stat(r, NULL, 0, &st, &E), SG_E_NOT_FOUND, "empty");
  EXPECT(sg_root_stat(r, S(""), &st, &E), SG_E_NOT_FOUND, "empty");
  EXPECT(sg_root_lstat(r, S(""), &st, &E), SG_E_NOT_FOUND, "empty");
  EXPECT(sg_root_open_file(r, S(""), O_RDONLY, 0, &fd, &E), SG_E_NOT_FOUND,
         "empty");
  EXPECT(sg_root_open_file(r, S(""), O_WRONLY | O_CREAT, 0644, &fd, &E),
         SG_E_NOT_FOUND, "empty");
  EXPECT(sg_root_open_root(r, S(""), &r2, &E), SG_E_NOT_FOUND, "empty");
  EXPECT(sg_root_readlink(r, S(""), &b, &E), SG_E_NOT_FOUND, "empty");
  EXPECT(sg_root_mkdir(r, S(""), 0755, &E), SG_E_NOT_FOUND, "empty");
  EXPECT(sg_root_remove(r, S(""), &E), SG_E_NOT_FOUND, "empty");
  EXPECT(sg_root_rename(r, S(""), S("c"), &E), SG_E_NOT_FOUND, "empty");
  EXPECT(sg_root_rename(r, S("a"), S(""), &E), SG_E_NOT_FOUND, "empty");
  UNTOUCHED(st);
  UNTOUCHED(fd);
  UNTOUCHED(b);
  UNTOUCHED(r2);
  CHECK(access(at("a"), F_OK) == 0);
  CHECK(access(at("c"), F_OK) != 0);
  sg_root_free(r);

  POISON(r2);
  {
    char d[600];
    int n = snprintf(d, sizeof d, "%s%cx", dir, '\0');
    EXPECT(sg_root_open(d, (size_t)n, SG_RESOLVER_AUTO, &r2, &E),
           SG_E_PATH_INVALID, NULL);
  }
  UNTOUCHED(r2);
}

static void options_calls(sg_sandbox_options *o) {
  EXPECT(sg_sandbox_options_from_policy(NULL, NULL, &E), SG_E_REQUEST,
         "policy");
  EXPECT(sg_sandbox_options_add_read_root(NULL, S("/"), &E), SG_E_REQUEST,
         "options");
  EXPECT(sg_sandbox_options_add_read_root(o, NULL, 1, &E), SG_E_REQUEST,
         "read root");
  EXPECT(sg_sandbox_options_add_read_root(o, S(NOT_UTF8), &E), SG_E_REQUEST,
         "read root");
  EXPECT(sg_sandbox_options_set_write_root(NULL, S("/"), &E), SG_E_REQUEST,
         "options");
  EXPECT(sg_sandbox_options_set_write_root(o, NULL, 1, &E), SG_E_REQUEST,
         "write root");
  EXPECT(sg_sandbox_options_add_deny_write(NULL, S("*"), &E), SG_E_REQUEST,
         "options");
  EXPECT(sg_sandbox_options_add_deny_write(o, NULL, 1, &E), SG_E_REQUEST,
         "deny-write");
  EXPECT(sg_sandbox_options_set_max_read_bytes(NULL, 1, &E), SG_E_REQUEST,
         "options");
  EXPECT(sg_sandbox_options_set_max_write_bytes(NULL, 1, &E), SG_E_REQUEST,
         "options");
  EXPECT(sg_sandbox_options_set_allow_overwrite(NULL, true, &E), SG_E_REQUEST,
         "options");
  EXPECT(sg_sandbox_options_set_restricted(NULL, true, &E), SG_E_REQUEST,
         "options");
  EXPECT(sg_sandbox_options_set_resolver(NULL, 0, &E), SG_E_REQUEST,
         "options");
  EXPECT(sg_sandbox_options_set_resolver(o, 3, &E), SG_E_REQUEST, "resolver");
  EXPECT(sg_sandbox_options_set_fs_ops_budget(NULL, 1, &E), SG_E_REQUEST,
         "options");
  EXPECT(sg_sandbox_options_set_audit(NULL, NULL, NULL, &E), SG_E_REQUEST,
         "options");
  sg_sandbox *sb;
  POISON(sb);
  EXPECT(sg_sandbox_new(NULL, &sb, &E), SG_E_REQUEST, "options");
  EXPECT(sg_sandbox_new(o, NULL, &E), SG_E_REQUEST, "out");
  UNTOUCHED(sb);

  /* A root whose name holds a NUL byte is refused when built, and so is a
   * deny pattern holding one. */
  sg_sandbox_options *bad = sg_sandbox_options_new();
  char d[600];
  int n = snprintf(d, sizeof d, "%s%cx", dir, '\0');
  EXPECT(sg_sandbox_options_add_read_root(bad, d, (size_t)n, &E), SG_OK, NULL);
  EXPECT(sg_sandbox_new(bad, &sb, &E), SG_E_PATH_INVALID, NULL);
  UNTOUCHED(sb);
  sg_sandbox_options_free(bad);
  bad = sg_sandbox_options_new();
  EXPECT(sg_sandbox_options_set_write_root(bad, d, (size_t)n, &E), SG_OK,
         NULL);
  EXPECT(sg_sandbox_new(bad, &sb, &E), SG_E_PATH_INVALID, NULL);
  UNTOUCHED(sb);
  sg_sandbox_options_free(bad);
}

static void sandbox_calls(sg_sandbox *sb) {
  sg_bytes b;
  sg_stat st;
  sg_lines li;
  uint64_t n;
  POISON(b);
  POISON(st);
  POISON(li);
  POISON(n);
  EXPECT(sg_sandbox_close(NULL, &E), SG_E_REQUEST, "sandbox");
  EXPECT(sg_sandbox_warnings(NULL, &b, &E), SG_E_REQUEST, "sandbox");
  EXPECT(sg_sandbox_warnings(sb, NULL, &E), SG_E_REQUEST, "out");
  EXPECT(sg_sandbox_host_name(NULL, S("/"), false, &b, &E), SG_E_REQUEST,
         "sandbox");
  EXPECT(sg_sandbox_host_name(sb, NULL, 1, false, &b, &E), SG_E_REQUEST,
         "path");
  EXPECT(sg_sandbox_host_name(sb, S("a"), false, NULL, &E), SG_E_REQUEST,
         "out");
  EXPECT(sg_sandbox_read(NULL, S("a"), &b, &E), SG_E_REQUEST, "sandbox");
  EXPECT(sg_sandbox_read(sb, NULL, 1, &b, &E), SG_E_REQUEST, "path");
  EXPECT(sg_sandbox_read(sb, S(NOT_UTF8), &b, &E), SG_E_REQUEST, "UTF-8");
  EXPECT(sg_sandbox_read(sb, S("a"), NULL, &E), SG_E_REQUEST, "out");
  EXPECT(sg_sandbox_read(sb, S(WITH_NUL), &b, &E), SG_E_PATH_INVALID, NULL);
  EXPECT(sg_sandbox_read_lines(NULL, S("a"), 0, 0, &b, &li, &E), SG_E_REQUEST,
         "sandbox");
  EXPECT(sg_sandbox_read_lines(sb, NULL, 1, 0, 0, &b, &li, &E), SG_E_REQUEST,
         "path");
  EXPECT(sg_sandbox_read_lines(sb, S("a"), 0, 0, NULL, &li, &E), SG_E_REQUEST,
         "content");
  EXPECT(sg_sandbox_read_lines(sb, S("a"), 0, 0, &b, NULL, &E), SG_E_REQUEST,
         "info");
  EXPECT(sg_sandbox_read_lines_cancellable(sb, S("a"), 0, 0, NULL, NULL, &li,
                                           &E),
         SG_E_REQUEST, "content");
  EXPECT(sg_sandbox_write(NULL, S("w"), B("x"), false, &n, &E), SG_E_REQUEST,
         "sandbox");
  EXPECT(sg_sandbox_write(sb, NULL, 1, B("x"), false, &n, &E), SG_E_REQUEST,
         "path");
  EXPECT(sg_sandbox_write(sb, S("w"), NULL, 1, false, &n, &E), SG_E_REQUEST,
         "data");
  EXPECT(sg_sandbox_edit(NULL, S("a"), S("A"), S("B"), false, &n, &E),
         SG_E_REQUEST, "sandbox");
  EXPECT(sg_sandbox_edit(sb, NULL, 1, S("A"), S("B"), false, &n, &E),
         SG_E_REQUEST, "path");
  EXPECT(sg_sandbox_edit(sb, S("a"), NULL, 1, S("B"), false, &n, &E),
         SG_E_REQUEST, "old");
  EXPECT(sg_sandbox_edit(sb, S("a"), S("A"), NULL, 1, false, &n, &E),
         SG_E_REQUEST, "new");
  EXPECT(sg_sandbox_edit(sb, S("a"), S("A"), S(NOT_UTF8), false, &n, &E),
         SG_E_REQUEST, "new");
  EXPECT(sg_sandbox_list(NULL, S(""), &b, &E), SG_E_REQUEST, "sandbox");
  EXPECT(sg_sandbox_list(sb, NULL, 1, &b, &E), SG_E_REQUEST, "path");
  EXPECT(sg_sandbox_list(sb, S(""), NULL, &E), SG_E_REQUEST, "out");
  EXPECT(sg_sandbox_stat(NULL, S("a"), &st, &E), SG_E_REQUEST, "sandbox");
  EXPECT(sg_sandbox_stat(sb, NULL, 1, &st, &E), SG_E_REQUEST, "path");
  EXPECT(sg_sandbox_stat(sb, S("a"), NULL, &E), SG_E_REQUEST, "out");
  EXPECT(sg_sandbox_mkdir(NULL, S("d"), &E), SG_E_REQUEST, "sandbox");
  EXPECT(sg_sandbox_mkdir(sb, NULL, 1, &E), SG_E_REQUEST, "path");
  EXPECT(sg_sandbox_delete(NULL, S("a"), &E), SG_E_REQUEST, "sandbox");
  EXPECT(sg_sandbox_delete(sb, NULL, 1, &E), SG_E_REQUEST, "path");
  EXPECT(sg_sandbox_rename(NULL, S("a"), S("b"), &E), SG_E_REQUEST, "sandbox");
  EXPECT(sg_sandbox_rename(sb, NULL, 1, S("b"), &E), SG_E_REQUEST, "from");
  EXPECT(sg_sandbox_rename(sb, S("a"), NULL, 1, &E), SG_E_REQUEST, "to");
  EXPECT(sg_sandbox_glob(NULL, S("*"), NULL, 0, &b, &E), SG_E_REQUEST,
         "sandbox");
  EXPECT(sg_sandbox_glob(sb, NULL, 1, NULL, 0, &b, &E), SG_E_REQUEST,
         "pattern");
  EXPECT(sg_sandbox_glob(sb, S("*"), NULL, 1, &b, &E), SG_E_REQUEST, "path");
  EXPECT(sg_sandbox_glob(sb, S("*"), NULL, 0, NULL, &E), SG_E_REQUEST, "out");
  EXPECT(sg_sandbox_glob_found(sb, S("*"), NULL, 0, NULL, &E), SG_E_REQUEST,
         "out");
  EXPECT(sg_sandbox_glob_found_cancellable(NULL, S("*"), NULL, 0, NULL, &b,
                                           &E),
         SG_E_REQUEST, "sandbox");
  EXPECT(sg_sandbox_grep(NULL, S("x"), NULL, 0, 0, &b, &E), SG_E_REQUEST,
         "sandbox");
  EXPECT(sg_sandbox_grep(sb, NULL, 1, NULL, 0, 0, &b, &E), SG_E_REQUEST,
         "pattern");
  EXPECT(sg_sandbox_grep(sb, S("x"), NULL, 0, 0, NULL, &E), SG_E_REQUEST,
         "out");
  EXPECT(sg_sandbox_grep_with(sb, S("x"), NULL, 0, NULL, 2, &b, &E),
         SG_E_REQUEST, "options");
  EXPECT(sg_sandbox_grep_with(sb, S("x"), NULL, 0, S("[1]"), &b, &E),
         SG_E_REQUEST, "options");
  EXPECT(sg_sandbox_grep_with(sb, S("x"), NULL, 0, S("{\"mode\":7}"), &b, &E),
         SG_E_REQUEST, "mode");
  EXPECT(sg_sandbox_grep_found(sb, S("x"), NULL, 0, S("{\"zz\":1}"), &b, &E),
         SG_E_REQUEST, "zz");
  EXPECT(sg_sandbox_grep_found_cancellable(sb, S("x"), NULL, 0, NULL, 0, NULL,
                                           NULL, &E),
         SG_E_REQUEST, "out");
  /* Counts past the documented caps are refused, not clamped. */
  EXPECT(sg_sandbox_read_lines(sb, S("f"), 1, 2001, &b, &li, &E), SG_E_REQUEST,
         "2000");
  EXPECT(sg_sandbox_read_lines(sb, S("f"), UINT64_MAX, UINT64_MAX, &b, &li,
                               &E),
         SG_E_REQUEST, "limit");
  EXPECT(sg_sandbox_grep(sb, S("x"), NULL, 0, 1001, &b, &E), SG_E_REQUEST,
         "max_results");
  EXPECT(sg_sandbox_grep_with(sb, S("x"), NULL, 0, S("{\"max_results\":0}"),
                              &b, &E),
         SG_E_REQUEST, "max_results");
  UNTOUCHED(b);
  UNTOUCHED(st);
  UNTOUCHED(li);
  UNTOUCHED(n);

  /* A pattern holding a NUL byte is text like any other. */
  EXPECT(sg_sandbox_grep(sb, S(WITH_NUL), NULL, 0, 0, &b, &E), SG_OK, NULL);
  sg_bytes_free(&b);
  sg_bytes_free(&b);
  EXPECT(sg_sandbox_glob(sb, S(WITH_NUL), NULL, 0, &b, &E), SG_OK, NULL);
  sg_bytes_free(&b);
  /* A host path holding a NUL byte names no file: `sg_sandbox_host_name`
   * refuses it, read side and write side, absolute or relative, in a root
   * or not, rather than answering a name every call would then refuse
   * (cabi25). `a`, the bytes before the NUL, is a file that exists. */
  {
    char d[600];
    int k = snprintf(d, sizeof d, "%s/a%cb", dir, '\0');
    POISON(b);
    for (int w = 0; w < 2; w++) {
      EXPECT(sg_sandbox_host_name(sb, d, (size_t)k, w, &b, &E),
             SG_E_PATH_INVALID, "NUL");
      EXPECT(sg_sandbox_host_name(sb, S(WITH_NUL), w, &b, &E),
             SG_E_PATH_INVALID, "NUL");
      EXPECT(sg_sandbox_host_name(sb, S("/elsewhere/a\0b"), w, &b, &E),
             SG_E_PATH_INVALID, "NUL");
    }
    UNTOUCHED(b);
  }
  /* An empty name is E_PATH_INVALID for every sandbox call, as for the
   * JSON endpoint and `Sandbox` in Rust (cabi25). */
  POISON(b);
  POISON(st);
  POISON(n);
  EXPECT(sg_sandbox_stat(sb, NULL, 0, &st, &E), SG_E_PATH_INVALID, "empty");
  EXPECT(sg_sandbox_stat(sb, S(""), &st, &E), SG_E_PATH_INVALID, "empty");
  EXPECT(sg_sandbox_read(sb, S(""), &b, &E), SG_E_PATH_INVALID, "empty");
  EXPECT(sg_sandbox_list(sb, S(""), &b, &E), SG_E_PATH_INVALID, "empty");
  EXPECT(sg_sandbox_write(sb, S(""), B("x"), true, &n, &E), SG_E_PATH_INVALID,
         "empty");
  EXPECT(sg_sandbox_mkdir(sb, S(""), &E), SG_E_PATH_INVALID, "empty");
  EXPECT(sg_sandbox_delete(sb, S(""), &E), SG_E_PATH_INVALID, "empty");
  EXPECT(sg_sandbox_rename(sb, S(""), S("c"), &E), SG_E_PATH_INVALID, "empty");
  EXPECT(sg_sandbox_rename(sb, S("a"), S(""), &E), SG_E_PATH_INVALID, "empty");
  UNTOUCHED(b);
  UNTOUCHED(st);
  UNTOUCHED(n);
  CHECK(access(at("a"), F_OK) == 0);
  /* After close, every call answers E_CLOSED; `err` may be NULL. */
  EXPECT(sg_sandbox_close(sb, &E), SG_OK, NULL);
  EXPECT(sg_sandbox_close(sb, &E), SG_OK, NULL);
  CHECK(sg_sandbox_close(sb, NULL) == SG_OK);
  POISON(b);
  EXPECT(sg_sandbox_read(sb, S("a"), &b, &E), SG_E_CLOSED, NULL);
  EXPECT(sg_sandbox_warnings(sb, &b, &E), SG_E_CLOSED, NULL);
  EXPECT(sg_sandbox_list(sb, S(""), &b, &E), SG_E_CLOSED, NULL);
  EXPECT(sg_sandbox_glob(sb, S("*"), NULL, 0, &b, &E), SG_E_CLOSED, NULL);
  EXPECT(sg_sandbox_grep(sb, S("A"), NULL, 0, 0, &b, &E), SG_E_CLOSED, NULL);
  EXPECT(sg_sandbox_write(sb, S("w"), B("x"), false, NULL, &E), SG_E_CLOSED,
         NULL);
  UNTOUCHED(b);
  CHECK(access(at("w"), F_OK) != 0);
}

static void exec_calls(sg_policy *p) {
  sg_executor *ex;
  sg_exec_result r;
  POISON(ex);
  EXPECT(sg_executor_new(NULL, &ex, &E), SG_E_REQUEST, "policy");
  EXPECT(sg_executor_new(p, NULL, &E), SG_E_REQUEST, "out");
  UNTOUCHED(ex);
  EXPECT(sg_executor_set_audit(NULL, NULL, NULL, &E), SG_E_REQUEST,
         "executor");
  EXPECT(sg_executor_start(NULL, &E), SG_E_REQUEST, "executor");
  EXPECT(sg_executor_dispose(NULL, &E), SG_E_REQUEST, "executor");
  POISON(r);
  EXPECT(sg_executor_exec(NULL, S("true"), NULL, 0, 0, NULL, &r, &E),
         SG_E_REQUEST, "executor");
  EXPECT(sg_executor_new(p, &ex, &E), SG_OK, NULL);
  EXPECT(sg_executor_exec(ex, NULL, 4, NULL, 0, 0, NULL, &r, &E), SG_E_REQUEST,
         "command");
  EXPECT(sg_executor_exec(ex, S(NOT_UTF8), NULL, 0, 0, NULL, &r, &E),
         SG_E_REQUEST, "command");
  EXPECT(sg_executor_exec(ex, S("true"), NULL, 3, 0, NULL, &r, &E),
         SG_E_REQUEST, "cwd");
  EXPECT(sg_executor_exec(ex, S("true"), NULL, 0, 0, NULL, NULL, &E),
         SG_E_REQUEST, "out");
  UNTOUCHED(r);
  /* The policy grants no exec: refused, outputs alone. */
  EXPECT(sg_executor_exec(ex, S("true"), NULL, 0, 0, NULL, &r, &E),
         SG_E_DENIED, NULL);
  UNTOUCHED(r);
  /* Disposing twice, then freeing. */
  EXPECT(sg_executor_dispose(ex, &E), SG_OK, NULL);
  EXPECT(sg_executor_dispose(ex, &E), SG_OK, NULL);
  sg_executor_free(ex);

  sg_abort *a;
  POISON(a);
  EXPECT(sg_abort_new(NULL, &E), SG_E_REQUEST, "out");
  EXPECT(sg_abort_trigger(NULL, &E), SG_E_REQUEST, "signal");
  UNTOUCHED(a);
  EXPECT(sg_abort_new(&a, &E), SG_OK, NULL);
  EXPECT(sg_abort_trigger(a, &E), SG_OK, NULL);
  EXPECT(sg_abort_trigger(a, &E), SG_OK, NULL);
  CHECK(sg_abort_is_triggered(a));
  sg_abort_free(a);
}

static void fetch_calls(sg_policy *p) {
  sg_fetcher *f;
  sg_bytes b;
  POISON(f);
  EXPECT(sg_fetcher_new(NULL, &f, &E), SG_E_REQUEST, "policy");
  EXPECT(sg_fetcher_new(p, NULL, &E), SG_E_REQUEST, "out");
  UNTOUCHED(f);
  EXPECT(sg_fetcher_set_audit(NULL, NULL, NULL, &E), SG_E_REQUEST, "fetcher");
  POISON(b);
  EXPECT(sg_fetcher_fetch(NULL, S("{}"), &b, &E), SG_E_REQUEST, "fetcher");
  EXPECT(sg_fetcher_new(p, &f, &E), SG_OK, NULL);
  EXPECT(sg_fetcher_fetch(f, NULL, 2, &b, &E), SG_E_REQUEST, "request");
  EXPECT(sg_fetcher_fetch(f, S(NOT_UTF8), &b, &E), SG_E_REQUEST, "request");
  EXPECT(sg_fetcher_fetch(f, S("{\"url\":\"http://x/\"}"), NULL, &E),
         SG_E_REQUEST, "answer");
  EXPECT(sg_fetcher_fetch_cancellable(f, S("{}"), NULL, NULL, &E),
         SG_E_REQUEST, "answer");
  UNTOUCHED(b);
  /* A request read but refused answers JSON too. */
  EXPECT(sg_fetcher_fetch(f, NULL, 0, &b, &E), SG_E_REQUEST, NULL);
  CHECK(b.ptr != NULL && b.len > 0 && memchr(b.ptr, '{', b.len) != NULL);
  sg_bytes_free(&b);
  EXPECT(sg_fetcher_fetch(f, S("{\"url\":\"https://example.com/\"}"), &b, &E),
         SG_E_NET_DENIED, NULL);
  sg_bytes_free(&b);
  sg_fetcher_free(f);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: abuse24 DIR\n");
    return 2;
  }
  snprintf(dir, sizeof dir, "%s", argv[1]);
  mkdir(at("sub"), 0755);
  put_file("f", "file\n");

  the_error_accessors_take_null();

  sg_policy *p = NULL;
  EXPECT(sg_policy_parse(B("[fs]\nread_roots = [\".\"]\n"), dir, strlen(dir),
                         &p, &E),
         SG_OK, NULL);
  if (p == NULL)
    return 1;
  policy_calls(p);
  root_calls();

  sg_sandbox_options *o = sg_sandbox_options_new();
  options_calls(o);
  EXPECT(sg_sandbox_options_add_read_root(o, dir, strlen(dir), &E), SG_OK,
         NULL);
  EXPECT(sg_sandbox_options_set_write_root(o, dir, strlen(dir), &E), SG_OK,
         NULL);
  sg_sandbox *sb = NULL;
  EXPECT(sg_sandbox_new(o, &sb, &E), SG_OK, NULL);
  sg_sandbox_options_free(o);
  if (sb == NULL)
    return 1;
  sandbox_calls(sb);
  sg_sandbox_free(sb);

  exec_calls(p);
  fetch_calls(p);
  sg_policy_free(p);

  printf("%d checks, %d failed\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
