/* name_pattern.h — the one pattern syntax of the options that pick values by name
 * (--freeze, --train, --lora-target): a glob (fnmatch, matched against the whole name:
 * '*.bias', 'layer1.*'), or, behind the prefix "re:", a POSIX extended regular
 * expression searched anywhere in the name ('re:^layer[12]\.'), as --freeze and
 * --train took before globs were the default (a glob that matches nothing may still
 * be read that way: ot_name_pattern_as_regex). Errors say which syntax was read. */
#ifndef OT_NAME_PATTERN_H
#define OT_NAME_PATTERN_H

#include <regex.h>
#include <stdbool.h>

#include "ir.h"

#define OT_NAME_PATTERN_RE_PREFIX "re:"

typedef struct ot_name_pattern {
    const char *text;  /* as given (not copied) */
    bool is_regex;     /* "re:" prefix, or a glob read the old way (legacy) */
    bool legacy;       /* a glob that matched no name, read as the regex it was before globs */
    bool compiled;     /* re holds a compiled expression (free it) */
    regex_t re;
} ot_name_pattern;

/* Reads text for option opt (named in messages): an empty pattern or a regular
 * expression that does not compile is OT_E_USAGE naming the option, the pattern and
 * its syntax. */
ot_status ot_name_pattern_compile(ot_name_pattern *p, const char *opt, const char *text, ot_error *err);
bool ot_name_pattern_match(const ot_name_pattern *p, const char *name);
void ot_name_pattern_free(ot_name_pattern *p);
/* Old scripts: --freeze and --train took regular expressions without a prefix. For a
 * glob that matched no name the caller may read its text as that regex: true when it
 * compiles and either has no glob wildcard (fc1, bias$) or holds regex-only syntax
 * (^ $ \ | ( ) + {: 'blocks\.0\..*'); p is then a regex, legacy set. A glob such as
 * 'ln_9*' stays a glob. ot_name_pattern_as_glob undoes it. */
bool ot_name_pattern_as_regex(ot_name_pattern *p);
void ot_name_pattern_as_glob(ot_name_pattern *p);
/* Fails with OT_E_USAGE: option opt's pattern p matched no name of `what` (e.g.
 * "parameter"), saying how the syntax read it and how to write the other one. */
ot_status ot_name_pattern_no_match(const ot_name_pattern *p, const char *opt, const char *what, const char *hint,
                                   ot_error *err);

#endif
