/* json_write.h — the one JSON string escaper behind every JSON onnxtrain writes
 * (--json on stdout, the training report, grad's index.json). */
#ifndef OT_JSON_WRITE_H
#define OT_JSON_WRITE_H

#include <stdio.h>

/* Writes s (NULL as "") as a JSON string literal: quotes, '"' and '\\' escaped with a
 * backslash, other control characters as \u00XX; bytes from 0x80 up (UTF-8) as they
 * are. */
void ot_json_string(FILE *f, const char *s);

#endif
