/* cli_run.h — running the built `onnxtrain` binary from a test as a user would: a
 * shell command with its stdout and stderr captured in a file, the file read back,
 * and an assertion that the output contains a text. A test names its own output
 * file, e.g. `#define run(...) cli_run(TMP "/out.txt", __VA_ARGS__)`. */
#ifndef OT_TEST_CLI_RUN_H
#define OT_TEST_CLI_RUN_H

/* Runs the printf-formatted shell command with stdout and stderr redirected to
 * out_path; returns its exit status (-1 when it did not exit normally). */
int cli_run(const char *out_path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The whole file, NUL-terminated and malloc'd; NULL when it cannot be read. */
char *cli_slurp(const char *path);
/* The number after the nth (0-based) occurrence of key in the file (e.g. key
 * "\"peak_bytes\": " in a --json output); fails the test when there is none. */
double cli_json_nth(const char *path, const char *key, int nth);
/* Fails the test, printing the file, unless it contains needle. */
void cli_expect_in(const char *path, const char *needle);

#endif
