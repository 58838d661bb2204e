/* Fresh-install check of the C library: a confined read, a refused escape
 * and a confined command, against the policy given as argv[1]. Built with
 * `pkg-config --cflags --libs sandgate` (shared) or `sandgate-static`. */
#include <sandgate.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char NOTE[] = "hello from the workspace\n";
static const char COMMAND[] = "cat note.txt; cat ../private/secret.txt";

static void fail(const char *what, sg_error *err) {
  fprintf(stderr, "c: FAIL: %s: %s\n", what, err ? sg_error_message(err) : "");
  sg_error_free(err);
  exit(1);
}

/* The executor's audit event of the one command: its op and exit code. */
struct seen {
  int events;
  char op[8];
  int has_exit_code;
  int exit_code;
};

static void on_audit(void *user, const sg_audit_event *e) {
  struct seen *s = user;
  s->events++;
  snprintf(s->op, sizeof s->op, "%s", e->op);
  s->has_exit_code = e->has_exit_code;
  s->exit_code = e->exit_code;
}

int main(int argc, char **argv) {
  sg_error *err = NULL;
  sg_policy *policy = NULL;
  sg_sandbox_options *options = NULL;
  sg_sandbox *sb = NULL;
  sg_executor *ex = NULL;
  sg_bytes text = {0};
  sg_exec_result r;

  if (argc != 2) {
    fprintf(stderr, "usage: %s POLICY\n", argv[0]);
    return 2;
  }
  printf("c: sandgate %s, ABI %u.%u\n", sg_version(), sg_abi_version() >> 16, sg_abi_version() & 0xffff);
  /* The installed library answers the ABI of the installed header. */
  if (sg_abi_version() >> 16 != SANDGATE_ABI_MAJOR || (sg_abi_version() & 0xffff) < SANDGATE_ABI_MINOR)
    fail("the library's ABI is older than its header's", NULL);
  if (sg_policy_load(argv[1], strlen(argv[1]), &policy, &err) != SG_OK) fail("load the policy", err);
  if (sg_sandbox_options_from_policy(policy, &options, &err) != SG_OK) fail("sandbox options", err);
  if (sg_sandbox_new(options, &sb, &err) != SG_OK) fail("sandbox", err);
  sg_sandbox_options_free(options);

  if (sg_sandbox_read(sb, "note.txt", strlen("note.txt"), &text, &err) != SG_OK) fail("read note.txt", err);
  if (text.len != strlen(NOTE) || memcmp(text.ptr, NOTE, text.len) != 0) fail("note.txt's content", NULL);
  printf("c: read note.txt -> \"%.*s\"\n", (int)text.len - 1, (const char *)text.ptr);
  sg_bytes_free(&text);

  const char *secret = "../private/secret.txt";
  if (sg_sandbox_read(sb, secret, strlen(secret), &text, &err) == SG_OK) fail("a read outside the workspace succeeded", NULL);
  printf("c: read %s -> refused %s\n", secret, sg_error_code_name(err));
  sg_error_free(err);
  err = NULL;
  sg_sandbox_free(sb);

  if (sg_executor_new(policy, &ex, &err) != SG_OK) fail("executor", err);
  struct seen seen = {0, "", 0, 0};
  if (sg_executor_set_audit(ex, on_audit, &seen, &err) != SG_OK) fail("executor audit", err);
  memset(&r, 0, sizeof r);
  if (sg_executor_exec(ex, COMMAND, strlen(COMMAND), NULL, 0, 0, NULL, &r, &err) != SG_OK) fail("exec", err);
  const char *out = (const char *)r.stdout_bytes.ptr;
  size_t out_len = r.stdout_bytes.len;
  /* The confinement report is JSON; its "fs" member says whether Landlock
   * confined the filesystem. */
  char *conf = calloc(r.confinement_json.len + 1, 1);
  if (conf == NULL) fail("out of memory", NULL);
  if (r.confinement_json.len > 0) memcpy(conf, r.confinement_json.ptr, r.confinement_json.len);
  int fs = strstr(conf, "\"fs\":true") != NULL;
  free(conf);
  printf("c: exec \"%s\" -> exit %d, stdout \"%.*s\", landlock fs %s\n", COMMAND, r.exit_code, (int)out_len,
         out ? out : "", fs ? "true" : "false");
  if (out_len < strlen(NOTE) || memcmp(out, NOTE, strlen(NOTE)) != 0) fail("the command's output lacks the note", NULL);
  if (fs && (r.exit_code == 0 || (out_len > strlen(NOTE)))) fail("the shell read outside its roots", NULL);
  if (seen.events != 1 || strcmp(seen.op, "exec") != 0 || !seen.has_exit_code || seen.exit_code != r.exit_code)
    fail("the executor's audit event", NULL);
  printf("c: audit -> op %s, exit %d\n", seen.op, seen.exit_code);
  sg_exec_result_free(&r);
  sg_executor_free(ex);
  sg_policy_free(policy);
  printf("c: ok\n");
  return 0;
}
